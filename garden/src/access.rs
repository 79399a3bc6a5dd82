//! The garden's keys and who reaches it with them: the lab CA signs the
//! garden's serving certificates (its kube-apiserver's, gardener-apiserver's),
//! the operator's client certificate (group `system:masters`) and one per
//! gardenlet (`gardener.cloud:system:seed:<seed>` in
//! `gardener.cloud:system:seeds`, Gardener's identity for a gardenlet). They
//! live in the lab's `pki/garden/`; [`client`] builds a client from them.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use cpmlab_core::pki::{write_pem, Ca, CertKey};
use cpmlab_model::state::{LabDir, LabState};

use crate::client::{Garden, GARDEN_SNI};
use crate::objects::{gardenlet_user, SEEDS_GROUP};
use crate::GardenError;

/// The garden's port (its kube-apiserver).
pub const GARDEN_PORT: u16 = 443;
/// The aggregator's client certificate's name (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// Who talks to the garden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The lab's operator (`cpmlab` commands): `system:masters`.
    Operator,
    /// A seed's gardenlet.
    Gardenlet(String),
}

impl Identity {
    fn file(&self) -> String {
        match self {
            Identity::Operator => "operator".into(),
            Identity::Gardenlet(s) => format!("gardenlet-{s}"),
        }
    }
}

/// The lab's garden keys directory.
pub fn dir(lab: &LabDir) -> PathBuf {
    lab.pki().join("garden")
}

/// Every certificate the garden's containers need, issued once at `up`.
pub struct GardenKeys {
    /// The garden kube-apiserver's serving certificate.
    pub kube_apiserver: CertKey,
    /// gardener-apiserver's serving certificate (the APIServices' name).
    pub gardener_apiserver: CertKey,
    /// The aggregator's client certificate (front-proxy CA).
    pub front_proxy_client: CertKey,
    /// gardener-apiserver's own client of the garden kube-apiserver
    /// (delegated authentication and authorization, its informers).
    pub gardener_apiserver_client: CertKey,
    /// The garden kube-apiserver's service-account key pair (PEM).
    pub sa: (String, String),
}

impl GardenKeys {
    /// Issues the garden's keys and writes the client ones (operator,
    /// gardenlets) to `pki/garden/`.
    pub fn generate(
        lab: &LabDir,
        state: &LabState,
        ca: &Ca,
        front_proxy: &Ca,
    ) -> Result<GardenKeys, GardenError> {
        let g = state
            .garden
            .as_ref()
            .ok_or_else(|| GardenError::Other("the lab has no garden".into()))?;
        let pki =
            |e: cpmlab_core::pki::PkiError| GardenError::Other(format!("the garden's keys: {e}"));
        let kube_apiserver = ca
            .issue_member(
                "garden-kube-apiserver",
                &[GARDEN_SNI.into(), "kubernetes.default.svc".into()],
                &[IpAddr::V4(g.kube_apiserver.ip)],
            )
            .map_err(pki)?;
        let gardener_apiserver = ca
            .issue_member(
                "gardener-apiserver",
                &[
                    "gardener-apiserver.garden.svc".into(),
                    "gardener-apiserver".into(),
                ],
                &[IpAddr::V4(g.gardener_apiserver.ip)],
            )
            .map_err(pki)?;
        let front_proxy_client = front_proxy.issue_client(FRONT_PROXY_CLIENT).map_err(pki)?;
        let gardener_apiserver_client = ca
            .issue_client_in("gardener-apiserver", "system:masters")
            .map_err(pki)?;
        let kp = rcgen::KeyPair::generate().map_err(|e| GardenError::Other(e.to_string()))?;
        let sa = (kp.serialize_pem(), kp.public_key_pem());
        let d = dir(lab);
        std::fs::create_dir_all(&d)
            .map_err(|e| GardenError::Other(format!("{}: {e}", d.display())))?;
        let mut clients = vec![(
            Identity::Operator,
            ca.issue_client_in("cpmlab-operator", "system:masters")
                .map_err(pki)?,
        )];
        for s in &state.seeds {
            clients.push((
                Identity::Gardenlet(s.name.clone()),
                ca.issue_client_in(&gardenlet_user(&s.name), SEEDS_GROUP)
                    .map_err(pki)?,
            ));
        }
        for (who, ck) in &clients {
            write(&d.join(format!("{}.crt", who.file())), &ck.cert_pem)?;
            write(&d.join(format!("{}.key", who.file())), &ck.key_pem)?;
        }
        Ok(GardenKeys {
            kube_apiserver,
            gardener_apiserver,
            front_proxy_client,
            gardener_apiserver_client,
            sa,
        })
    }
}

fn write(path: &Path, pem: &str) -> Result<(), GardenError> {
    write_pem(path, pem).map_err(|e| GardenError::Other(format!("{}: {e}", path.display())))
}

fn read(path: &Path) -> Result<String, GardenError> {
    std::fs::read_to_string(path).map_err(|e| {
        GardenError::Other(format!(
            "{}: {e} (a lab made before the garden has none: `cpmlab down` and `cpmlab up` again)",
            path.display()
        ))
    })
}

/// The garden's address (its kube-apiserver on the garden network).
pub fn address(state: &LabState) -> Result<SocketAddr, GardenError> {
    let g = state
        .garden
        .as_ref()
        .ok_or_else(|| GardenError::Other(format!("lab `{}` has no garden (made before the garden was part of every lab: `cpmlab down` and `cpmlab up` again)", state.name)))?;
    Ok(SocketAddr::from((g.kube_apiserver.ip, GARDEN_PORT)))
}

/// A client of the lab's garden as `who`.
pub fn client(lab: &LabDir, state: &LabState, who: &Identity) -> Result<Garden, GardenError> {
    let addr = address(state)?;
    let d = dir(lab);
    let ca = read(&lab.pki().join("ca.crt"))?;
    let cert = read(&d.join(format!("{}.crt", who.file())))?;
    let key = read(&d.join(format!("{}.key", who.file())))?;
    Garden::new(addr, &ca, &cert, &key)
}

/// A client of the garden from a kubeconfig `kubeconfig` wrote (a kind
/// seed's gardenlet reads its own from the Secret mounted in its pod).
pub fn client_from_kubeconfig(path: &Path) -> Result<Garden, GardenError> {
    let text = read(path)?;
    let c = crate::kubeconfig::parse(&text)
        .map_err(|e| GardenError::Other(format!("{}: {e}", path.display())))?;
    let addr: SocketAddr = c
        .server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| {
            GardenError::Other(format!(
                "{}: server `{}` is not https://<address>:<port> ({e})",
                path.display(),
                c.server
            ))
        })?;
    Garden::new(addr, &c.ca_pem, &c.cert_pem, &c.key_pem)
}

/// The kubeconfig of `who` for the garden (`cpmlab kubeconfig --garden`).
pub fn kubeconfig(lab: &LabDir, state: &LabState, who: &Identity) -> Result<String, GardenError> {
    let addr = address(state)?;
    let d = dir(lab);
    let ca = read(&lab.pki().join("ca.crt"))?;
    let cert = read(&d.join(format!("{}.crt", who.file())))?;
    let key = read(&d.join(format!("{}.key", who.file())))?;
    let mut k =
        crate::kubeconfig::render(&state.name, &format!("https://{addr}"), &ca, &cert, &key);
    // The garden's certificate names the garden, not its address.
    k = k.replace(
        "    certificate-authority-data:",
        &format!("    tls-server-name: {GARDEN_SNI}\n    certificate-authority-data:"),
    );
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_written_for_the_operator_and_each_gardenlet() {
        let d = tempfile::tempdir().unwrap();
        let s = cpmlab_model::plan::sample_state();
        let lab = LabDir::new(d.path(), &s.name);
        lab.create().unwrap();
        let ca = Ca::generate(&s.name).unwrap();
        write(&lab.pki().join("ca.crt"), &ca.cert_pem).unwrap();
        let fp = Ca::generate("fp").unwrap();
        let keys = GardenKeys::generate(&lab, &s, &ca, &fp).unwrap();
        assert!(keys
            .gardener_apiserver
            .cert_pem
            .contains("BEGIN CERTIFICATE"));
        for f in [
            "operator.crt",
            "operator.key",
            "gardenlet-seed-a.crt",
            "gardenlet-seed-b.key",
        ] {
            assert!(dir(&lab).join(f).is_file(), "{f}");
        }
        assert!(client(&lab, &s, &Identity::Gardenlet("seed-b".into())).is_ok());
        let k = kubeconfig(&lab, &s, &Identity::Operator).unwrap();
        assert!(k.contains(&format!("tls-server-name: {GARDEN_SNI}")), "{k}");
        assert!(k.contains("server: https://10.213.3.11:443"), "{k}");
    }
}
