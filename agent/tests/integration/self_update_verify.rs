//! Self-update: a release is accepted only when its signature verifies with a key of
//! `[update] public_keys` over the exact manifest bytes, the manifest is for this host's
//! target, and its version is newer (older only when the manifest and the config both allow
//! it). Each refusal names what failed.

use odac_agent::update::manifest::{ManifestError, Policy, verify};
use odac_agent::update::{TrustedKeys, target};
use odac_protocol::SignedRelease;

use super::self_update_support::{Key, manifest};

fn keys(of: &[&Key]) -> TrustedKeys {
    TrustedKeys::parse(&of.iter().map(|k| k.public()).collect::<Vec<_>>()).unwrap()
}

fn policy<'a>(keys: &'a TrustedKeys, host: &'a str) -> Policy<'a> {
    Policy {
        keys,
        running: "0.1.0",
        target: host,
        allow_downgrade: false,
    }
}

/// Why `signed` is refused under the default policy with `trusted` on this host.
fn refusal(signed: &SignedRelease, trusted: &TrustedKeys) -> ManifestError {
    let host = target();
    verify(signed, &policy(trusted, &host)).unwrap_err()
}

#[test]
fn a_release_signed_by_a_trusted_key_is_accepted() {
    let key = Key::new();
    let trusted = keys(&[&Key::new(), &key]);
    let host = target();
    let signed = key.sign(&manifest("0.2.0", b"agent v2"));
    let m = verify(&signed, &policy(&trusted, &host)).unwrap();
    assert_eq!(m.version, "0.2.0");
    assert_eq!(m.size, 8);
}

#[test]
fn a_release_signed_by_another_key_is_refused() {
    let trusted = keys(&[&Key::new()]);
    let signed = Key::new().sign(&manifest("0.2.0", b"agent v2"));
    let e = refusal(&signed, &trusted);
    assert_eq!(e, ManifestError::BadSignature);
    assert!(e.to_string().contains("update.public_keys"), "{e}");
}

#[test]
fn a_manifest_changed_after_signing_is_refused() {
    let key = Key::new();
    let trusted = keys(&[&key]);
    let mut signed = key.sign(&manifest("0.2.0", b"agent v2"));
    // the same signature over a manifest pointing elsewhere
    signed.manifest = signed.manifest.replace("127.0.0.1:9", "127.0.0.1:8");
    assert_eq!(refusal(&signed, &trusted), ManifestError::BadSignature);
}

#[test]
fn an_unsigned_or_garbled_signature_is_refused() {
    let key = Key::new();
    let trusted = keys(&[&key]);
    let mut signed = key.sign(&manifest("0.2.0", b"agent v2"));
    signed.signature = String::new();
    assert_eq!(
        refusal(&signed, &trusted),
        ManifestError::BadSignatureEncoding
    );
    signed.signature = "not base64!".to_owned();
    assert_eq!(
        refusal(&signed, &trusted),
        ManifestError::BadSignatureEncoding
    );
}

#[test]
fn without_trusted_keys_every_release_is_refused() {
    let none = TrustedKeys::default();
    let signed = Key::new().sign(&manifest("0.2.0", b"agent v2"));
    let e = refusal(&signed, &none);
    assert_eq!(e, ManifestError::NoKeys);
    assert_eq!(
        e.to_string(),
        "no release key is trusted: update.public_keys is empty"
    );
}

#[test]
fn a_release_for_another_target_is_refused() {
    let key = Key::new();
    let trusted = keys(&[&key]);
    let mut m = manifest("0.2.0", b"agent v2");
    m.target = "riscv64gc-unknown-linux-gnu".to_owned();
    let e = refusal(&key.sign(&m), &trusted);
    assert!(matches!(e, ManifestError::WrongTarget { .. }), "{e}");
    assert!(e.to_string().contains("riscv64gc-unknown-linux-gnu"), "{e}");
}

#[test]
fn a_downgrade_needs_both_the_manifest_and_the_config() {
    let key = Key::new();
    let trusted = keys(&[&key]);
    let host = target();
    let mut p = policy(&trusted, &host);
    p.running = "0.3.0";
    let mut m = manifest("0.2.0", b"agent v2");
    for (in_manifest, in_config, ok) in [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (true, true, true),
    ] {
        m.allow_downgrade = in_manifest;
        p.allow_downgrade = in_config;
        let got = verify(&key.sign(&m), &p);
        assert_eq!(
            got.is_ok(),
            ok,
            "manifest {in_manifest} config {in_config}: {got:?}"
        );
        if let Err(e) = got {
            assert!(matches!(e, ManifestError::Downgrade { .. }), "{e}");
        }
    }
}

#[test]
fn the_running_version_and_malformed_manifests_are_refused() {
    let key = Key::new();
    let trusted = keys(&[&key]);
    let same = key.sign(&manifest("0.1.0", b"agent v1"));
    assert_eq!(
        refusal(&same, &trusted),
        ManifestError::SameVersion("0.1.0".to_owned())
    );
    let mut m = manifest("0.2.0", b"agent v2");
    m.sha256 = "ABC".to_owned();
    let e = refusal(&key.sign(&m), &trusted);
    assert!(e.to_string().starts_with("release manifest: sha256"), "{e}");
    let extra = key.sign_text(r#"{"version":"0.2.0","unknown":1}"#);
    let e = refusal(&extra, &trusted);
    assert!(matches!(e, ManifestError::Malformed(_)), "{e}");
}

#[test]
fn a_bad_key_in_the_config_names_its_index() {
    let e = TrustedKeys::parse(&[Key::new().public(), "ed25519:AAAA".to_owned()]).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(e.to_string().starts_with("update.public_keys[1]: "), "{e}");
    let e = TrustedKeys::parse(&["rsa:abc".to_owned()]).unwrap_err();
    assert!(e.to_string().contains("does not start with"), "{e}");
}
