//! The statistics a comparison states its differences with: a pass rate's
//! 95 % interval (Wilson's score interval, which behaves at 0 of n and n of
//! n where the normal approximation does not), Fisher's exact test for two
//! pass rates, and for a measure (downtime, p99, ...) the median, quartiles
//! and the Mann-Whitney U test's two-sided p-value (normal approximation
//! with ties corrected; exact enumeration for small samples).

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// Wilson's 95 % score interval for `k` successes of `n` (0..=1 each).
pub fn wilson(k: u32, n: u32) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 * ((p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn ln_factorial(n: u32) -> f64 {
    (1..=n).map(|i| (i as f64).ln()).sum()
}

/// The hypergeometric probability of a 2x2 table [[a, b], [c, d]].
fn table_p(a: u32, b: u32, c: u32, d: u32) -> f64 {
    let n = a + b + c + d;
    (ln_factorial(a + b) + ln_factorial(c + d) + ln_factorial(a + c) + ln_factorial(b + d)
        - ln_factorial(n)
        - ln_factorial(a)
        - ln_factorial(b)
        - ln_factorial(c)
        - ln_factorial(d))
    .exp()
}

/// Fisher's exact test, two-sided: is `k1` of `n1` different from `k2` of
/// `n2`? The sum of the probabilities of every table with the same margins
/// no more likely than the one observed.
pub fn fisher_exact(k1: u32, n1: u32, k2: u32, n2: u32) -> f64 {
    let (a, b, c, d) = (k1, n1 - k1, k2, n2 - k2);
    let observed = table_p(a, b, c, d);
    let row1 = a + b;
    let col1 = a + c;
    let n = a + b + c + d;
    let lo = col1.saturating_sub(n - row1);
    let hi = row1.min(col1);
    let mut p = 0.0;
    for x in lo..=hi {
        let t = table_p(x, row1 - x, col1 - x, n + x - row1 - col1);
        if t <= observed * (1.0 + 1e-9) {
            p += t;
        }
    }
    p.min(1.0)
}

/// A sample's spread: min, quartiles, median, max (linear interpolation
/// between order statistics, as most tools do).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The distribution-free interval of a median from order statistics: the
/// k-th smallest and k-th largest of n values cover the median with
/// probability 1 - 2·P(Binomial(n, ½) < k). The narrowest such interval
/// whose coverage is at least 95 %, with its coverage; with fewer than 6
/// values none reaches 95 % and the interval is the whole range (5 values:
/// 93.8 %). None without values.
pub fn median_interval(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(Binomial(n, ½) <= j) for j = 0..n.
    let mut cdf = Vec::with_capacity(n + 1);
    let mut acc = 0.0;
    for j in 0..=n {
        acc += (ln_choose(n as u32, j as u32) - n as f64 * std::f64::consts::LN_2).exp();
        cdf.push(acc);
    }
    let coverage = |k: usize| 1.0 - 2.0 * if k == 0 { 0.0 } else { cdf[k - 1] };
    // k counts from 1 (the smallest); the largest k that keeps 95 %.
    let mut k = 1;
    while k < n / 2 && coverage(k + 1) >= 0.95 {
        k += 1;
    }
    Some((v[k - 1], v[n - k], coverage(k)))
}

fn ln_choose(n: u32, k: u32) -> f64 {
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

pub fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(Spread {
        n: v.len(),
        min: v[0],
        q1: quantile(&v, 0.25),
        median: quantile(&v, 0.5),
        q3: quantile(&v, 0.75),
        max: v[v.len() - 1],
    })
}

/// Average ranks (ties share the mean of their ranks), 1-based.
fn ranks(all: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..all.len()).collect();
    idx.sort_by(|&a, &b| all[a].total_cmp(&all[b]));
    let mut r = vec![0.0; all.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && all[idx[j + 1]] == all[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// The standard normal's upper tail.
fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// erfc by the Numerical Recipes rational approximation (|error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Mann-Whitney U, two-sided p-value: do `a` and `b` come from the same
/// distribution? Exact (every split of the pooled ranks) when both samples
/// are small, else the normal approximation with the tie correction.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let r = ranks(&pooled);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let mean = (n1 * n2) as f64 / 2.0;
    if n1 + n2 <= 20 {
        // Exact: the rank sums of every n1-subset of the pooled ranks.
        let mut count_extreme = 0u64;
        let mut total = 0u64;
        let observed = (u1 - mean).abs();
        let n = n1 + n2;
        let mut chosen = Vec::with_capacity(n1);
        fn walk(
            start: usize,
            n: usize,
            k: usize,
            chosen: &mut Vec<usize>,
            f: &mut dyn FnMut(&[usize]),
        ) {
            if chosen.len() == k {
                f(chosen);
                return;
            }
            for i in start..n {
                if n - i < k - chosen.len() {
                    break;
                }
                chosen.push(i);
                walk(i + 1, n, k, chosen, f);
                chosen.pop();
            }
        }
        walk(0, n, n1, &mut chosen, &mut |c: &[usize]| {
            let s: f64 = c.iter().map(|&i| r[i]).sum();
            let u = s - (n1 * (n1 + 1)) as f64 / 2.0;
            total += 1;
            if (u - mean).abs() >= observed - 1e-9 {
                count_extreme += 1;
            }
        });
        return Some(count_extreme as f64 / total as f64);
    }
    // Normal approximation with the tie correction.
    let n = (n1 + n2) as f64;
    let mut sorted = pooled.clone();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let var = (n1 * n2) as f64 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return Some(1.0);
    }
    let z = ((u1 - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some((2.0 * normal_sf(z)).min(1.0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_medians_interval_is_the_order_statistics_that_cover_it() {
        // Five values: only the range, with 1 - 2/32 = 93.75 % coverage.
        let (lo, hi, c) = super::median_interval(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((lo, hi), (1.0, 5.0));
        assert!((c - 0.9375).abs() < 1e-9, "{c}");
        // Ten values: the 2nd and 9th (97.9 %), not the 3rd and 8th (89.1 %).
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let (lo, hi, c) = super::median_interval(&v).unwrap();
        assert_eq!((lo, hi), (2.0, 9.0));
        assert!((0.95..0.99).contains(&c), "{c}");
        assert_eq!(super::median_interval(&[7.0]), Some((7.0, 7.0, 0.0)));
        assert!(super::median_interval(&[]).is_none());
    }

    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Wilson's interval against the closed form evaluated independently
    /// (the score interval R's `prop.test(k, n, correct = FALSE)` reports).
    #[test]
    fn wilson_matches_the_score_interval() {
        let (lo, hi) = wilson(0, 10);
        assert!(close(lo, 0.0, 1e-9) && close(hi, 0.2775, 1e-3), "{lo} {hi}");
        let (lo, hi) = wilson(7, 10);
        assert!(
            close(lo, 0.3968, 1e-3) && close(hi, 0.8922, 1e-3),
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(10, 10);
        assert!(close(lo, 0.7225, 1e-3) && close(hi, 1.0, 1e-9), "{lo} {hi}");
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    /// Fisher's exact test against the hypergeometric sum evaluated
    /// independently with exact binomials (what R's `fisher.test` reports).
    #[test]
    fn fisher_matches_rs_fisher_test() {
        // 0 of 10 against 7 of 10: p = 0.003096
        assert!(close(fisher_exact(0, 10, 7, 10), 0.003096, 1e-5));
        // 3 of 5 against 3 of 5: no difference.
        assert!(close(fisher_exact(3, 5, 3, 5), 1.0, 1e-9));
        // 1 of 5 against 5 of 5: p = 0.04762
        assert!(close(fisher_exact(1, 5, 5, 5), 0.047619, 1e-5));
    }

    /// Mann-Whitney: two completely separated samples of 5 have p = 2 of
    /// C(10, 5) = 252 splits (the exact two-sided value).
    #[test]
    fn mann_whitney_exact_and_approximate() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        // Completely separated, 5 and 5: p = 2/252 = 0.007937
        assert!(close(mann_whitney(&a, &b).unwrap(), 0.007937, 1e-5));
        assert!(close(mann_whitney(&a, &a).unwrap(), 1.0, 1e-9));
        // Large samples take the normal approximation and still separate.
        let big_a: Vec<f64> = (0..30).map(f64::from).collect();
        let big_b: Vec<f64> = (100..130).map(f64::from).collect();
        assert!(mann_whitney(&big_a, &big_b).unwrap() < 1e-6);
        assert!(mann_whitney(&[], &a).is_none());
    }

    #[test]
    fn spread_gives_quartiles_by_interpolation() {
        let s = spread(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(
            (s.min, s.q1, s.median, s.q3, s.max),
            (1.0, 2.0, 3.0, 4.0, 5.0)
        );
        assert!(spread(&[]).is_none());
    }
}
