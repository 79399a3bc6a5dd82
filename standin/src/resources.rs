//! The resources the stand-in API server serves, their etcd keys (as
//! kube-apiserver lays them out) and the discovery documents clients read.

use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group; "" is the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
}

pub const NAMESPACES: Resource = Resource {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    singular: "namespace",
    namespaced: false,
    short_names: &["ns"],
};

pub const CONFIGMAPS: Resource = Resource {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    namespaced: true,
    short_names: &["cm"],
};

pub const LEASES: Resource = Resource {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    singular: "lease",
    namespaced: true,
    short_names: &[],
};

pub const RESOURCES: &[Resource] = &[NAMESPACES, CONFIGMAPS, LEASES];

pub const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `/registry/<plural>/<namespace>/<name>`, or without namespace.
    pub fn key(&self, ns: Option<&str>, name: &str) -> String {
        match (self.namespaced, ns) {
            (true, Some(ns)) => format!("/registry/{}/{ns}/{name}", self.plural),
            _ => format!("/registry/{}/{name}", self.plural),
        }
    }

    /// Prefix of a list: all namespaces, or one.
    pub fn prefix(&self, ns: Option<&str>) -> String {
        match (self.namespaced, ns) {
            (true, Some(ns)) => format!("/registry/{}/{ns}/", self.plural),
            _ => format!("/registry/{}/", self.plural),
        }
    }

    pub fn find(group: &str, version: &str, plural: &str) -> Option<Resource> {
        RESOURCES
            .iter()
            .copied()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    fn discovery_entry(&self) -> Value {
        json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": VERBS,
            "shortNames": self.short_names,
            "storageVersionHash": "",
        })
    }
}

/// `GET /api`
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `GET /api/v1` or `GET /apis/<group>/<version>`
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let rs: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(Resource::discovery_entry)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": rs,
    }))
}

fn group_entry(group: &str) -> Value {
    let version = RESOURCES
        .iter()
        .find(|r| r.group == group)
        .map(|r| r.version)
        .unwrap_or("v1");
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `GET /apis`
pub fn api_groups() -> Value {
    let mut groups: Vec<&str> = RESOURCES
        .iter()
        .map(|r| r.group)
        .filter(|g| !g.is_empty())
        .collect();
    groups.dedup();
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups.into_iter().map(group_entry).collect::<Vec<_>>(),
    })
}

/// `GET /apis/<group>`
pub fn api_group(group: &str) -> Option<Value> {
    RESOURCES.iter().any(|r| r.group == group).then(|| {
        let mut g = group_entry(group);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

/// `GET /openapi/v3`: one document per group-version. Clients (kubectl)
/// read it to learn that the server validates fields itself.
pub fn openapi_v3_index() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = RESOURCES.iter().map(|r| (r.group, r.version)).collect();
    gvs.dedup();
    for (g, v) in gvs {
        let p = openapi_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=cpmlab1")}),
        );
    }
    json!({ "paths": paths })
}

fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3/<api/v1 | apis/g/v>`: paths with the parameters that
/// tell clients which query options the server honours; object schemas are
/// left open (the stand-in does not validate beyond what it stores).
pub fn openapi_v3_doc(path: &str) -> Option<Value> {
    let rs: Vec<&Resource> = RESOURCES
        .iter()
        .filter(|r| openapi_path(r.group, r.version) == path)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}});
    let write_params = json!([
        param("dryRun"),
        param("fieldManager"),
        param("fieldValidation")
    ]);
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for r in rs {
        let base = format!("/{}", path);
        let (coll, item) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{base}/{}", r.plural),
                format!("{base}/{}/{{name}}", r.plural),
            )
        };
        let gvk = json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": write_params,
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk[0],
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(coll, json!({"get": op("list"), "post": op("post")}));
        paths.insert(
            item,
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
        let schema_name = if r.group.is_empty() {
            format!("io.k8s.api.core.{}.{}", r.version, r.kind)
        } else {
            format!(
                "io.k8s.api.{}.{}.{}",
                r.group.split('.').next().unwrap_or(r.group),
                r.version,
                r.kind
            )
        };
        schemas.insert(
            schema_name,
            json!({"type": "object", "x-kubernetes-group-version-kind": gvk}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "cpmlab stand-in API server", "version": "v1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_kube_apiserver_layout() {
        assert_eq!(
            CONFIGMAPS.key(Some("default"), "x"),
            "/registry/configmaps/default/x"
        );
        assert_eq!(
            NAMESPACES.key(None, "default"),
            "/registry/namespaces/default"
        );
        assert_eq!(
            LEASES.key(Some("kube-system"), "l"),
            "/registry/leases/kube-system/l"
        );
        assert_eq!(CONFIGMAPS.prefix(None), "/registry/configmaps/");
        assert_eq!(LEASES.api_version(), "coordination.k8s.io/v1");
    }

    #[test]
    fn discovery_lists_what_is_served() {
        let core = resource_list("", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["namespaces", "configmaps"]);
        assert!(resource_list("apps", "v1").is_none());
        assert_eq!(api_groups()["groups"][0]["name"], "coordination.k8s.io");
        assert!(api_group("coordination.k8s.io").is_some());
        let idx = openapi_v3_index();
        assert!(idx["paths"]["api/v1"]["serverRelativeURL"].is_string());
        let doc = openapi_v3_doc("api/v1").unwrap();
        let post = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"];
        assert!(post["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"));
    }
}
