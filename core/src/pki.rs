//! The lab's certificate authority: one CA per lab, server+peer certificates
//! per etcd member, client certificates for the lab's own tools.

use std::net::IpAddr;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The lab CA. Its parameters are a pure function of the lab name, so the CA
/// can be rebuilt as an issuer from the stored key alone.
pub struct Ca {
    lab: String,
    key: KeyPair,
    pub cert_pem: String,
}

fn ca_params(lab: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "cpmlab");
    dn.push(DnType::CommonName, format!("cpmlab {lab} CA"));
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    p.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(3650);
    p
}

impl Ca {
    pub fn generate(lab: &str) -> Result<Ca, PkiError> {
        let key = KeyPair::generate()?;
        let cert = ca_params(lab).self_signed(&key)?;
        Ok(Ca {
            lab: lab.to_string(),
            key,
            cert_pem: cert.pem(),
        })
    }

    /// Rebuilds the issuer from a stored certificate and key.
    pub fn from_pem(lab: &str, cert_pem: &str, key_pem: &str) -> Result<Ca, PkiError> {
        Ok(Ca {
            lab: lab.to_string(),
            key: KeyPair::from_pem(key_pem)?,
            cert_pem: cert_pem.to_string(),
        })
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    fn issue(
        &self,
        cn: &str,
        dns: &[String],
        ips: &[IpAddr],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Result<CertKey, PkiError> {
        self.issue_in(cn, "cpmlab", dns, ips, usages)
    }

    fn issue_in(
        &self,
        cn: &str,
        organization: &str,
        dns: &[String],
        ips: &[IpAddr],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Result<CertKey, PkiError> {
        let mut p = CertificateParams::new(dns.to_vec())?;
        for ip in ips {
            p.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, organization);
        dn.push(DnType::CommonName, cn);
        p.distinguished_name = dn;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = usages;
        p.not_before = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        p.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(825);
        let key = KeyPair::generate()?;
        let issuer = Issuer::new(ca_params(&self.lab), &self.key);
        let cert = p.signed_by(&key, &issuer)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// An etcd member's certificate: serves clients and peers, and is the
    /// client certificate the member presents to its peers.
    pub fn issue_member(
        &self,
        member: &str,
        dns: &[String],
        ips: &[IpAddr],
    ) -> Result<CertKey, PkiError> {
        let mut names = dns.to_vec();
        names.push("localhost".into());
        let mut addrs = ips.to_vec();
        addrs.push(IpAddr::from([127, 0, 0, 1]));
        self.issue(
            member,
            &names,
            &addrs,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A client-only certificate (the lab's tools, probes, API servers).
    pub fn issue_client(&self, cn: &str) -> Result<CertKey, PkiError> {
        self.issue(cn, &[], &[], vec![ExtendedKeyUsagePurpose::ClientAuth])
    }

    /// A client certificate of user `cn` in group `group` (the
    /// certificate's organisation, as Kubernetes reads it).
    pub fn issue_client_in(&self, cn: &str, group: &str) -> Result<CertKey, PkiError> {
        self.issue_in(
            cn,
            group,
            &[],
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        )
    }
}

/// Writes a PEM file: owner-only (0600) when it holds a key, else 0644.
pub fn write_pem(path: &Path, pem: &str) -> Result<(), PkiError> {
    let io = |source| PkiError::Io {
        path: path.display().to_string(),
        source,
    };
    if pem.contains("PRIVATE KEY") {
        crate::state::write_private(path, pem).map_err(io)
    } else {
        std::fs::write(path, pem).map_err(io)
    }
}

/// 32 bytes of the system's randomness.
fn random_bytes() -> [u8; 32] {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("system randomness");
    b
}

/// A TSIG secret (base64).
pub fn random_secret() -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, random_bytes())
}

/// A bearer token (hex).
pub fn random_token() -> String {
    hex::encode(random_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;
    use x509_parser::pem::parse_x509_pem;

    fn der(pem: &str) -> Vec<u8> {
        parse_x509_pem(pem.as_bytes()).unwrap().1.contents
    }

    #[test]
    fn member_cert_chains_to_ca_and_has_sans() {
        let ca = Ca::generate("t").unwrap();
        let leaf = ca
            .issue_member(
                "seed-a-etcd-0",
                &["seed-a-etcd-0.local.cpmlab.test".into()],
                &["10.1.2.10".parse().unwrap()],
            )
            .unwrap();
        let ca_der = der(&ca.cert_pem);
        let leaf_der = der(&leaf.cert_pem);
        let (_, ca_x) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        let (_, leaf_x) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();
        assert!(ca_x.is_ca());
        assert!(!leaf_x.is_ca());
        assert_eq!(leaf_x.issuer(), ca_x.subject());
        leaf_x
            .verify_signature(Some(ca_x.public_key()))
            .expect("leaf is signed by the CA");
        let sans = leaf_x.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = sans
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => d.to_string(),
                GeneralName::IPAddress(b) => format!("ip:{b:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert!(
            names.contains(&"seed-a-etcd-0.local.cpmlab.test".to_string()),
            "{names:?}"
        );
        assert!(names.contains(&"localhost".to_string()));
        assert!(
            names.contains(&"ip:[10, 1, 2, 10]".to_string()),
            "{names:?}"
        );
        let eku = leaf_x.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && eku.client_auth);
    }

    #[test]
    fn ca_rebuilt_from_pem_signs_verifiable_certs() {
        let ca = Ca::generate("t").unwrap();
        let again = Ca::from_pem("t", &ca.cert_pem, &ca.key_pem()).unwrap();
        let client = again.issue_client("cpmlab").unwrap();
        let ca_der = der(&ca.cert_pem);
        let leaf_der = der(&client.cert_pem);
        let (_, ca_x) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        let (_, leaf_x) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();
        leaf_x.verify_signature(Some(ca_x.public_key())).unwrap();
        assert_eq!(leaf_x.issuer(), ca_x.subject());
        let eku = leaf_x.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
    }

    #[test]
    fn another_ca_does_not_verify() {
        let a = Ca::generate("a").unwrap();
        let b = Ca::generate("b").unwrap();
        let leaf = a.issue_client("x").unwrap();
        let b_der = der(&b.cert_pem);
        let leaf_der = der(&leaf.cert_pem);
        let (_, b_x) = x509_parser::parse_x509_certificate(&b_der).unwrap();
        let (_, leaf_x) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();
        assert!(leaf_x.verify_signature(Some(b_x.public_key())).is_err());
    }
}
