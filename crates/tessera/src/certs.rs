//! `tessera certs`: a certificate authority for a cluster, and certificates for its daemons.

use std::path::PathBuf;

use tessera_protocol::tls::{write_pem, Authority};

use crate::failure::Failure;

// `tessera certs` (its help: `Command::Certs`).
#[derive(clap::Args)]
pub struct CertsArgs {
    /// Directory for the authority and the certificates (created if absent).
    dir: PathBuf,
    /// A host name or IP address the daemon is reached by (repeat for each).
    #[arg(long = "host", required = true, value_name = "HOST")]
    hosts: Vec<String>,
    /// File name (without extension) of the certificate and key (default: the first
    /// --host).
    #[arg(long)]
    name: Option<String>,
}

/// `tessera certs DIR --host HOST...`: the authority on first use, then one daemon's
/// certificate.
pub fn certs(args: CertsArgs) -> Result<(), Failure> {
    let CertsArgs { dir, hosts, name } = args;
    let fail = |e: &dyn std::fmt::Display| Failure::Error(e.to_string());
    let name = name.as_deref().unwrap_or(&hosts[0]);
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') || name == "ca" {
        return Err(Failure::Error(format!(
            "{name:?} cannot name a certificate file: give --name (no slashes, not \"ca\")"
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| fail(&format!("{}: {e}", dir.display())))?;
    let (ca_cert, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let authority = match (ca_cert.exists(), ca_key.exists()) {
        (true, true) => Authority::load(&ca_cert, &ca_key).map_err(|e| fail(&e))?,
        (false, false) => {
            let authority = Authority::create().map_err(|e| fail(&e))?;
            write_pem(&ca_key, &authority.key_pem(), true).map_err(|e| fail(&e))?;
            write_pem(&ca_cert, authority.certificate_pem(), false).map_err(|e| fail(&e))?;
            eprintln!(
                "made a certificate authority: {} (trusted with --tls-ca) and {} (keep it \
                 private: it signs certificates)",
                ca_cert.display(),
                ca_key.display()
            );
            authority
        }
        _ => {
            return Err(Failure::Error(format!(
                "{} has only one of ca.pem and ca.key: restore the other, or start afresh in \
                 an empty directory",
                dir.display()
            )))
        }
    };
    let issued = authority.issue(&hosts).map_err(|e| fail(&e))?;
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    write_pem(&key, &issued.key_pem, true).map_err(|e| fail(&e))?;
    write_pem(&cert, &issued.certificate_pem, false).map_err(|e| fail(&e))?;
    println!(
        "--tls-cert {} --tls-key {} --tls-ca {}",
        cert.display(),
        key.display(),
        ca_cert.display()
    );
    eprintln!("certificate for {} signed", hosts.join(", "));
    Ok(())
}
