//! What a comparison varies: `--variants KNOB=V1,V2,...` (several flags make
//! their cross product). A knob is a name for a field of the scenario (the
//! table below), or the field's own dotted path (`topology.dns.ttl`). Each
//! variant is the scenario with its fields set, written out as a scenario
//! file of its own and checked like any other (file, line and field in an
//! error), so what ran is on disk beside its results.

use std::path::Path;

use serde_json::Value;

use crate::errors::BadInput;
use crate::scenario::Scenario;

/// Knob names and the scenario field each sets.
pub const KNOBS: &[(&str, &str, &str)] = &[
    ("plan", "migration.plan", "membership plan"),
    (
        "handover",
        "migration.leader_handover",
        "how the source leader leaves: remove (upstream's) or move-leader",
    ),
    (
        "order",
        "migration.order",
        "the steps' order around the DNS switch: gep, early-drain, dns-first",
    ),
    (
        "gateway",
        "migration.gateway_handover",
        "what the source gateway does for kept connections: none, drain-gateway, drain-gateway-in-place, max-connection-age, forward (max-connection-age with the gateways' maximum at 60s unless max_age or the scenario names one)",
    ),
    (
        "max_age",
        "topology.api.gateway_max_connection_duration",
        "the gateways' maximum downstream connection duration (max-connection-age)",
    ),
    (
        "cc",
        "topology.network.tcp_congestion_control",
        "TCP congestion control on the lab's links (cubic, bbr)",
    ),
    ("pre_vote", "topology.etcd.pre_vote", "etcd --pre-vote"),
    ("etcd", "topology.etcd.version", "etcd minor (3.4, 3.5)"),
    (
        "etcd_operator",
        "topology.etcd.operator",
        "who runs etcd: lab or etcd-druid (kind form, etcd 3.5)",
    ),
    (
        "dns_ttl",
        "topology.dns.ttl",
        "the API record's TTL, seconds",
    ),
    (
        "shutdown_delay",
        "topology.api.shutdown_delay",
        "kube-apiserver --shutdown-delay-duration",
    ),
    (
        "exposure",
        "topology.api.exposure",
        "the API's exposure: termination (Gardener's default) or passthrough",
    ),
    (
        "delay",
        "links.0.delay",
        "one-way delay of the first link profile",
    ),
    ("loss", "links.0.loss", "loss of the first link profile"),
    (
        "jitter",
        "links.0.jitter",
        "jitter of the first link profile",
    ),
    ("rate", "links.0.rate", "rate of the first link profile"),
];

/// One knob and the values to try.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// As written (`plan`, or a dotted path).
    pub knob: String,
    /// The scenario field it sets.
    pub path: String,
    pub values: Vec<String>,
}

/// One variant: a value per axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// `plan=rolling` or `plan=rolling,cc=bbr`.
    pub name: String,
    pub settings: Vec<(String, String)>,
}

impl Variant {
    /// A name fit for a file and a directory.
    pub fn slug(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| format!("{}-{}", k.replace('.', "_"), v))
            .collect::<Vec<_>>()
            .join("_")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// Parses one `--variants` value.
pub fn parse_axis(spec: &str) -> Result<Axis, BadInput> {
    let (knob, values) = spec.split_once('=').ok_or_else(|| {
        BadInput(format!(
            "--variants {spec}: not KNOB=V1,V2 (knobs: {})",
            knob_names()
        ))
    })?;
    let knob = knob.trim();
    let path = match KNOBS.iter().find(|(k, _, _)| *k == knob) {
        Some((_, p, _)) => p.to_string(),
        None if ["topology.", "migration.", "probes.", "links."]
            .iter()
            .any(|p| knob.starts_with(p)) =>
        {
            knob.to_string()
        }
        None => {
            return Err(BadInput(format!(
                "--variants {spec}: unknown knob `{knob}` (knobs: {}; or a scenario field's dotted path such as topology.dns.ttl)",
                knob_names()
            )))
        }
    };
    let values: Vec<String> = values
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(BadInput(format!("--variants {spec}: no values")));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = values.iter().find(|v| !seen.insert(v.as_str())) {
        return Err(BadInput(format!("--variants {spec}: `{dup}` twice")));
    }
    Ok(Axis {
        knob: knob.to_string(),
        path,
        values,
    })
}

fn knob_names() -> String {
    KNOBS
        .iter()
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every combination of the axes' values, the first axis slowest.
pub fn cross(axes: &[Axis]) -> Vec<Variant> {
    let mut out = vec![Variant {
        name: String::new(),
        settings: Vec::new(),
    }];
    for a in axes {
        let mut next = Vec::new();
        for v in &out {
            for val in &a.values {
                let mut settings = v.settings.clone();
                settings.push((a.knob.clone(), val.clone()));
                next.push(Variant {
                    name: settings
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    settings,
                });
            }
        }
        out = next;
    }
    out
}

/// A value as the knobs need it: an integer, a boolean, `default` (the
/// field left out), else a string (`3.5` stays a string: versions are
/// written as strings).
fn scalar(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    match v {
        // The field left out: whatever the lab takes when a file omits it.
        "default" => Value::Null,
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::from(v.to_string()),
    }
}

/// Sets `path` (dotted; a number indexes a list, growing it by one) in `doc`.
fn set(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut cur = doc;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if let Ok(idx) = p.parse::<usize>() {
            let arr = cur
                .as_array_mut()
                .ok_or_else(|| format!("{path}: {} is not a list", parts[..i].join(".")))?;
            if idx > arr.len() {
                return Err(format!("{path}: no entry {idx} to set"));
            }
            if idx == arr.len() {
                arr.push(if last {
                    Value::Null
                } else {
                    Value::Object(Default::default())
                });
            }
            if last {
                arr[idx] = value;
                return Ok(());
            }
            cur = &mut arr[idx];
        } else {
            if cur.is_null() {
                *cur = Value::Object(Default::default());
            }
            let obj = cur
                .as_object_mut()
                .ok_or_else(|| format!("{path}: {} is not a map", parts[..i].join(".")))?;
            if last {
                obj.insert(p.to_string(), value);
                return Ok(());
            }
            cur = obj.entry(p.to_string()).or_insert(Value::Null);
        }
    }
    Ok(())
}

/// The scenario with the variant's fields set and `seed` as its seed, as
/// YAML. A field a scenario does not have is bad input naming the knob.
pub fn render(
    base: &Scenario,
    variant: &Variant,
    axes: &[Axis],
    seed: u64,
) -> Result<String, BadInput> {
    let mut doc = serde_json::to_value(base).map_err(|e| BadInput(e.to_string()))?;
    for (knob, value) in &variant.settings {
        let axis = axes
            .iter()
            .find(|a| &a.knob == knob)
            .expect("a variant's knob is an axis");
        set(&mut doc, &axis.path, scalar(value))
            .map_err(|e| BadInput(format!("--variants {knob}: {e}")))?;
    }
    set(&mut doc, "seed", Value::from(seed)).map_err(BadInput)?;
    // A `max-connection-age` variant needs the gateways' maximum: the
    // default one when no axis and not the scenario names it (the written
    // variant file shows it).
    if doc["migration"]["gateway_handover"] == "max-connection-age"
        && doc["topology"]["api"]["gateway_max_connection_duration"].is_null()
    {
        set(
            &mut doc,
            "topology.api.gateway_max_connection_duration",
            Value::from(crate::migrate::gateway_handover::DEFAULT_MAX_CONNECTION_AGE),
        )
        .map_err(BadInput)?;
    }
    // Links set by a knob need a pair: the first seed pair, as the
    // scenario's own links name it.
    if let Some(first) = doc.get_mut("links").and_then(|l| l.get_mut(0)) {
        if first.get("between").is_none_or(Value::is_null) {
            first["between"] = Value::from("seed-a:seed-b");
        }
    }
    // Back through the type, so that an unknown field or a wrong type is
    // named as the knob that set it.
    let typed: Scenario = serde_json::from_value(doc).map_err(|e| {
        BadInput(format!(
            "--variants {}: the scenario does not take it: {e}",
            variant.name
        ))
    })?;
    serde_saphyr::to_string(&typed).map_err(|e| BadInput(e.to_string()))
}

/// Writes a variant's scenario file and checks it as `cpmlab run` would.
pub fn write(
    dir: &Path,
    file_name: &str,
    yaml: &str,
) -> Result<crate::scenario::ScenarioFile, anyhow::Error> {
    let path = dir.join(file_name);
    std::fs::write(&path, yaml)?;
    Ok(crate::scenario::load(&path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_max_connection_age_variant_brings_its_gateways_up_with_a_maximum() {
        let base: Scenario =
            serde_saphyr::from_str("description: x\nmigration: {plan: five-member}\n").unwrap();
        let axes = vec![parse_axis("gateway=none,max-connection-age").unwrap()];
        let vs = cross(&axes);
        let none = render(&base, &vs[0], &axes, 1).unwrap();
        assert!(!none.contains("gateway_max_connection_duration"), "{none}");
        let aged = render(&base, &vs[1], &axes, 1).unwrap();
        assert!(
            aged.contains("gateway_max_connection_duration: 60s"),
            "{aged}"
        );
        assert!(
            aged.contains("gateway_handover: max-connection-age"),
            "{aged}"
        );
        // An axis's own maximum wins.
        let axes = vec![
            parse_axis("gateway=max-connection-age").unwrap(),
            parse_axis("max_age=300s").unwrap(),
        ];
        let v = render(&base, &cross(&axes)[0], &axes, 1).unwrap();
        assert!(v.contains("gateway_max_connection_duration: 300s"), "{v}");
    }

    #[test]
    fn axes_parse_knobs_and_paths_and_refuse_the_rest() {
        let a = parse_axis("plan=six-member,rolling").unwrap();
        assert_eq!(a.path, "migration.plan");
        assert_eq!(a.values, ["six-member", "rolling"]);
        assert_eq!(
            parse_axis("topology.dns.ttl=5,120").unwrap().path,
            "topology.dns.ttl"
        );
        for bad in ["plan", "colour=red", "plan=", "plan=a,a"] {
            assert!(parse_axis(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_cross_product_names_every_setting() {
        let v = cross(&[
            parse_axis("plan=a,b").unwrap(),
            parse_axis("cc=cubic,bbr").unwrap(),
        ]);
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "plan=a,cc=cubic",
                "plan=a,cc=bbr",
                "plan=b,cc=cubic",
                "plan=b,cc=bbr"
            ]
        );
        assert_eq!(v[1].slug(), "plan-a_cc-bbr");
    }

    #[test]
    fn scalars_read_as_yaml_would_but_versions_stay_strings() {
        assert_eq!(scalar("120"), Value::from(120));
        assert_eq!(scalar("true"), Value::Bool(true));
        assert_eq!(scalar("3.5"), Value::from("3.5"));
        assert_eq!(scalar("bbr"), Value::from("bbr"));
        assert_eq!(scalar("default"), Value::Null);
    }

    #[test]
    fn set_reaches_into_maps_and_lists() {
        let mut d = serde_json::json!({"links": [{"between": "seed-a:seed-b", "delay": "25ms"}]});
        set(&mut d, "links.0.loss", Value::from("1%")).unwrap();
        set(&mut d, "topology.dns.ttl", Value::from(5)).unwrap();
        assert_eq!(d["links"][0]["loss"], "1%");
        assert_eq!(d["topology"]["dns"]["ttl"], 5);
        assert!(set(&mut d, "links.3.delay", Value::from("1ms")).is_err());
    }
}
