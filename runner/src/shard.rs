//! Splitting a scenario set into N shards that finish together (`cpmlab run
//! --shard K/N`): each scenario's expected duration (measured in an earlier
//! run, else declared in the file, else estimated from it), then the
//! longest first onto the shard with the least work so far. The split
//! depends only on the set and those durations, so the same scenario lands
//! in the same shard every time for the same set.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::scenario::ScenarioFile;

/// `K/N`: this is shard K (1-based) of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// The most shards a set is split into.
pub const MAX_SHARDS: usize = 64;

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not K/N (e.g. 2/3)"))?;
        let k: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("`{k}` in `{s}` is not a shard number"))?;
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in `{s}` is not a shard count"))?;
        if n == 0 || n > MAX_SHARDS {
            return Err(format!(
                "the shard count must be 1 to {MAX_SHARDS}, not {n}"
            ));
        }
        if k == 0 || k > n {
            return Err(format!("shard {k} of {n} does not exist (1 to {n})"));
        }
        Ok(Shard { index: k, count: n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where a scenario's expected duration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its wall time in an earlier run (`--durations DIR`).
    Measured,
    /// `expected_duration:` in the file.
    Declared,
    /// Worked out from the file (see [`estimate`]).
    Estimated,
}

/// A scenario's name and expected duration.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    pub name: String,
    pub expected: Duration,
    pub source: Source,
}

/// A rough duration from what the file asks for, where nothing better is
/// known: bringing the lab up and down (60 s), the fill at 2 MiB/s through
/// the API, the probes' warm-up, run and cool-down, and a migration's
/// steps (120 s, the reference flow at 25 ms on this project's machines).
pub fn estimate(sf: &ScenarioFile) -> Duration {
    let c = &sf.checked;
    let mut d = Duration::from_secs(60) + c.warmup + c.duration + c.cooldown;
    if sf.scenario.migration.is_some() {
        d += Duration::from_secs(120);
    }
    if let Some(fill) = &sf.scenario.fill {
        if let Ok(bytes) = crate::fill::parse_size("fill.size", &fill.size) {
            d += Duration::from_secs(bytes / (2 << 20));
        }
    }
    d
}

/// Wall times of an earlier run: every `*/result.json` under `dir`.
pub fn measured(dir: &Path) -> BTreeMap<String, Duration> {
    super::summary::load_results(dir)
        .into_iter()
        .filter(|r| r.error.is_none() && !r.incomplete && r.wall_s > 0.0)
        .map(|r| (r.name, Duration::from_secs_f64(r.wall_s)))
        .collect()
}

/// Each file's expected duration: measured, else declared, else estimated.
pub fn weigh(files: &[ScenarioFile], measured: &BTreeMap<String, Duration>) -> Vec<Weighted> {
    files
        .iter()
        .map(|f| {
            let name = f.name();
            let (expected, source) = match (measured.get(&name), f.checked.expected_duration) {
                (Some(m), _) => (*m, Source::Measured),
                (None, Some(d)) => (d, Source::Declared),
                (None, None) => (estimate(f), Source::Estimated),
            };
            Weighted {
                name,
                expected,
                source,
            }
        })
        .collect()
}

/// The split: for each shard, the indices into `items` it runs (in the
/// items' own order). Longest first (ties by name), each onto the shard
/// with the least expected work (ties: the lowest shard).
pub fn split(items: &[Weighted], count: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        items[b]
            .expected
            .cmp(&items[a].expected)
            .then_with(|| items[a].name.cmp(&items[b].name))
    });
    let mut load = vec![Duration::ZERO; count];
    let mut shards = vec![Vec::new(); count];
    for i in order {
        let least = (0..count).min_by_key(|&s| (load[s], s)).unwrap_or(0);
        load[least] += items[i].expected;
        shards[least].push(i);
    }
    for s in &mut shards {
        s.sort_unstable();
    }
    shards
}

/// Each shard's expected total.
pub fn totals(items: &[Weighted], shards: &[Vec<usize>]) -> Vec<Duration> {
    shards
        .iter()
        .map(|s| s.iter().map(|&i| items[i].expected).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str, secs: u64) -> Weighted {
        Weighted {
            name: name.into(),
            expected: Duration::from_secs(secs),
            source: Source::Declared,
        }
    }

    #[test]
    fn shard_parses_k_of_n_and_refuses_the_rest() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "1/0", "3", "a/2", "1/65"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_item_lands_in_exactly_one_shard() {
        let items: Vec<Weighted> = (0..23)
            .map(|i| w(&format!("s{i:02}"), 30 + i * 17 % 200))
            .collect();
        for n in 1..=7 {
            let shards = split(&items, n);
            let mut all: Vec<usize> = shards.concat();
            all.sort_unstable();
            assert_eq!(all, (0..items.len()).collect::<Vec<_>>(), "{n} shards");
        }
    }

    #[test]
    fn the_split_is_the_same_whatever_order_the_files_come_in() {
        let items = vec![
            w("a", 100),
            w("b", 300),
            w("c", 100),
            w("d", 50),
            w("e", 250),
        ];
        let names = |items: &[Weighted], shards: Vec<Vec<usize>>| -> Vec<Vec<String>> {
            shards
                .into_iter()
                .map(|s| {
                    let mut v: Vec<String> = s.into_iter().map(|i| items[i].name.clone()).collect();
                    v.sort();
                    v
                })
                .collect()
        };
        let mut reversed = items.clone();
        reversed.reverse();
        assert_eq!(
            names(&items, split(&items, 3)),
            names(&reversed, split(&reversed, 3))
        );
    }

    /// Longest-first onto the least loaded shard: no shard exceeds the
    /// ideal share by more than the longest item (and, with equal items,
    /// not at all).
    #[test]
    fn shards_finish_together_within_the_longest_item() {
        let items: Vec<Weighted> = (0..20)
            .map(|i| w(&format!("s{i}"), 40 + (i * 37) % 300))
            .collect();
        let total: Duration = items.iter().map(|i| i.expected).sum();
        let longest = items.iter().map(|i| i.expected).max().unwrap();
        for n in 2..=5 {
            let t = totals(&items, &split(&items, n));
            let max = *t.iter().max().unwrap();
            assert!(max <= total / n as u32 + longest, "{n}: {t:?}");
        }
        let equal: Vec<Weighted> = (0..6).map(|i| w(&format!("e{i}"), 60)).collect();
        assert_eq!(
            totals(&equal, &split(&equal, 3)),
            vec![Duration::from_secs(120); 3]
        );
    }
}
