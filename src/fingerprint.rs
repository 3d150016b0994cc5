//! TEMPORARY stub (replaced by the real module at merge).
#![allow(missing_docs)]
pub type Fingerprint = [u8; 20];
pub fn fingerprint(request: &crate::request::Request, _include_headers: &[String]) -> Fingerprint {
    use sha1::Digest;
    let mut h = sha1::Sha1::new();
    h.update(request.method.as_bytes());
    h.update(request.url.as_bytes());
    h.update(&request.body);
    h.finalize().into()
}
pub fn to_hex(fp: &Fingerprint) -> String {
    fp.iter().map(|b| format!("{b:02x}")).collect()
}
pub fn from_hex(_s: &str) -> Option<Fingerprint> {
    None
}
