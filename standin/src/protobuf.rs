//! Request bodies in Kubernetes' protobuf encoding, as typed clients
//! (`kubectl create configmap`, client-go) send them: the `k8s\0` envelope
//! around a `runtime.Unknown`, whose `raw` is the object. Decoded to the same
//! JSON the stand-in stores, for the three types it serves. Responses stay
//! JSON (clients accept it). Field numbers are those of k8s.io/api's
//! generated.proto files.

use serde_json::{json, Map, Value};

use crate::errors::ApiError;

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\x00";

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("malformed protobuf body: {what}"))
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| bad("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }
    /// The next (field number, value), or None at the end.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, ApiError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (field, wt) = (key >> 3, key & 7);
        let w = match wt {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if wt == 1 { 8 } else { 4 };
                if self.pos + n > self.buf.len() {
                    return Err(bad("truncated fixed field"));
                }
                self.pos += n;
                Wire::Fixed
            }
            2 => {
                let n = self.varint()? as usize;
                let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
                let end = end.ok_or_else(|| bad("length past the end"))?;
                let b = &self.buf[self.pos..end];
                self.pos = end;
                Wire::Bytes(b)
            }
            _ => return Err(bad("unsupported wire type")),
        };
        Ok(Some((field, w)))
    }
}

fn string(b: &[u8]) -> Result<Value, ApiError> {
    std::str::from_utf8(b)
        .map(|s| json!(s))
        .map_err(|_| bad("string is not UTF-8"))
}

/// map<string,string> (or bytes, base64 as in JSON) entry into `m`.
fn map_entry(b: &[u8], m: &mut Map<String, Value>, bytes_value: bool) -> Result<(), ApiError> {
    use base64::Engine as _;
    let mut r = Reader::new(b);
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while let Some((f, w)) = r.next()? {
        if let Wire::Bytes(x) = w {
            match f {
                1 => k = string(x)?.as_str().unwrap_or_default().to_string(),
                2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(x)),
                2 => v = string(x)?,
                _ => {}
            }
        }
    }
    m.insert(k, v);
    Ok(())
}

fn time(b: &[u8]) -> Result<Value, ApiError> {
    let mut r = Reader::new(b);
    let mut secs = 0i64;
    while let Some((f, w)) = r.next()? {
        if let (1, Wire::Varint(v)) = (f, w) {
            secs = v as i64;
        }
    }
    let t =
        time::OffsetDateTime::from_unix_timestamp(secs).map_err(|_| bad("time out of range"))?;
    Ok(json!(t
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()))
}

fn object_meta(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    let mut finalizers = Vec::new();
    let mut r = Reader::new(b);
    while let Some((f, w)) = r.next()? {
        match (f, w) {
            // proto3 may carry empty strings; JSON omits them.
            (_, Wire::Bytes([])) => {}
            (1, Wire::Bytes(x)) => drop(m.insert("name".into(), string(x)?)),
            (2, Wire::Bytes(x)) => drop(m.insert("generateName".into(), string(x)?)),
            (3, Wire::Bytes(x)) => drop(m.insert("namespace".into(), string(x)?)),
            (6, Wire::Bytes(x)) => drop(m.insert("resourceVersion".into(), string(x)?)),
            (11, Wire::Bytes(x)) => map_entry(x, &mut labels, false)?,
            (12, Wire::Bytes(x)) => map_entry(x, &mut annotations, false)?,
            (14, Wire::Bytes(x)) => finalizers.push(string(x)?),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

fn config_map(b: &[u8]) -> Result<Value, ApiError> {
    let mut o = json!({});
    let (mut data, mut binary) = (Map::new(), Map::new());
    let mut r = Reader::new(b);
    while let Some((f, w)) = r.next()? {
        match (f, w) {
            (1, Wire::Bytes(x)) => o["metadata"] = object_meta(x)?,
            (2, Wire::Bytes(x)) => map_entry(x, &mut data, false)?,
            (3, Wire::Bytes(x)) => map_entry(x, &mut binary, true)?,
            (4, Wire::Varint(v)) => o["immutable"] = json!(v != 0),
            _ => {}
        }
    }
    if !data.is_empty() {
        o["data"] = Value::Object(data);
    }
    if !binary.is_empty() {
        o["binaryData"] = Value::Object(binary);
    }
    Ok(o)
}

fn namespace(b: &[u8]) -> Result<Value, ApiError> {
    let mut o = json!({});
    let mut r = Reader::new(b);
    while let Some((f, w)) = r.next()? {
        match (f, w) {
            (1, Wire::Bytes(x)) => o["metadata"] = object_meta(x)?,
            (2, Wire::Bytes(x)) => {
                let mut fins = Vec::new();
                let mut s = Reader::new(x);
                while let Some((1, Wire::Bytes(y))) = s.next()? {
                    fins.push(string(y)?);
                }
                o["spec"] = json!({"finalizers": fins});
            }
            _ => {}
        }
    }
    Ok(o)
}

fn lease(b: &[u8]) -> Result<Value, ApiError> {
    let mut o = json!({});
    let mut r = Reader::new(b);
    while let Some((f, w)) = r.next()? {
        match (f, w) {
            (1, Wire::Bytes(x)) => o["metadata"] = object_meta(x)?,
            (2, Wire::Bytes(x)) => {
                let mut spec = Map::new();
                let mut s = Reader::new(x);
                while let Some((g, v)) = s.next()? {
                    match (g, v) {
                        (1, Wire::Bytes(y)) => {
                            drop(spec.insert("holderIdentity".into(), string(y)?))
                        }
                        (2, Wire::Varint(n)) => {
                            drop(spec.insert("leaseDurationSeconds".into(), json!(n as i32)))
                        }
                        (3, Wire::Bytes(y)) => drop(spec.insert("acquireTime".into(), time(y)?)),
                        (4, Wire::Bytes(y)) => drop(spec.insert("renewTime".into(), time(y)?)),
                        (5, Wire::Varint(n)) => {
                            drop(spec.insert("leaseTransitions".into(), json!(n as i32)))
                        }
                        (6, Wire::Bytes(y)) => drop(spec.insert("strategy".into(), string(y)?)),
                        (7, Wire::Bytes(y)) => {
                            drop(spec.insert("preferredHolder".into(), string(y)?))
                        }
                        _ => {}
                    }
                }
                o["spec"] = Value::Object(spec);
            }
            _ => {}
        }
    }
    Ok(o)
}

/// Decodes a protobuf body for `kind` into its JSON form.
pub fn decode(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing the k8s\\0 envelope"))?;
    let mut r = Reader::new(rest);
    let (mut api_version, mut raw_kind, mut raw) = (String::new(), String::new(), None);
    while let Some((f, w)) = r.next()? {
        match (f, w) {
            (1, Wire::Bytes(tm)) => {
                let mut t = Reader::new(tm);
                while let Some((g, Wire::Bytes(y))) = t.next()? {
                    let s = string(y)?.as_str().unwrap_or_default().to_string();
                    if g == 1 {
                        api_version = s;
                    } else if g == 2 {
                        raw_kind = s;
                    }
                }
            }
            (2, Wire::Bytes(x)) => raw = Some(x),
            _ => {}
        }
    }
    if !raw_kind.is_empty() && raw_kind != kind {
        return Err(ApiError::BadRequest(format!(
            "body is a {raw_kind}, the URL names {kind}"
        )));
    }
    let raw = raw.ok_or_else(|| bad("no object in the envelope"))?;
    let mut o = match kind {
        "ConfigMap" => config_map(raw)?,
        "Namespace" => namespace(raw)?,
        "Lease" => lease(raw)?,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "no protobuf decoding for {other}"
            )))
        }
    };
    if !api_version.is_empty() {
        o["apiVersion"] = json!(api_version);
    }
    o["kind"] = json!(kind);
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes(field: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(field << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }
    fn entry(k: &str, v: &str) -> Vec<u8> {
        let mut e = Vec::new();
        bytes(1, k.as_bytes(), &mut e);
        bytes(2, v.as_bytes(), &mut e);
        e
    }

    #[test]
    fn a_configmap_as_kubectl_sends_it() {
        let mut meta = Vec::new();
        bytes(1, b"alpha", &mut meta);
        bytes(3, b"default", &mut meta);
        bytes(11, &entry("app", "probe"), &mut meta);
        let mut cm = Vec::new();
        bytes(1, &meta, &mut cm);
        bytes(2, &entry("k", "v1"), &mut cm);
        bytes(2, &entry("k2", "v2"), &mut cm);
        varint(4 << 3, &mut cm);
        varint(1, &mut cm);
        let mut tm = Vec::new();
        bytes(1, b"v1", &mut tm);
        bytes(2, b"ConfigMap", &mut tm);
        let mut unknown = Vec::new();
        bytes(1, &tm, &mut unknown);
        bytes(2, &cm, &mut unknown);
        bytes(4, b"application/vnd.kubernetes.protobuf", &mut unknown);
        let mut body = b"k8s\x00".to_vec();
        body.extend(unknown);
        let o = decode("ConfigMap", &body).unwrap();
        assert_eq!(
            o,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap", "immutable": true,
                "metadata": {"name": "alpha", "namespace": "default", "labels": {"app": "probe"}},
                "data": {"k": "v1", "k2": "v2"},
            })
        );
        assert!(decode("Lease", &body).is_err(), "kind mismatch");
        assert!(
            decode("ConfigMap", &body[..body.len() - 3]).is_err(),
            "truncated"
        );
        assert!(decode("ConfigMap", b"{}").is_err(), "not protobuf");
    }

    #[test]
    fn a_lease_with_times() {
        let mut t = Vec::new();
        varint(1 << 3, &mut t);
        varint(1_700_000_000, &mut t);
        let mut spec = Vec::new();
        bytes(1, b"me", &mut spec);
        varint(2 << 3, &mut spec);
        varint(15, &mut spec);
        bytes(4, &t, &mut spec);
        let mut meta = Vec::new();
        bytes(1, b"l", &mut meta);
        let mut lease = Vec::new();
        bytes(1, &meta, &mut lease);
        bytes(2, &spec, &mut lease);
        let mut unknown = Vec::new();
        bytes(2, &lease, &mut unknown);
        let mut body = b"k8s\x00".to_vec();
        body.extend(unknown);
        let o = decode("Lease", &body).unwrap();
        assert_eq!(o["spec"]["holderIdentity"], "me");
        assert_eq!(o["spec"]["leaseDurationSeconds"], 15);
        assert_eq!(o["spec"]["renewTime"], "2023-11-14T22:13:20Z");
    }
}
