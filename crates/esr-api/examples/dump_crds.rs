//! Prints every generated CRD as YAML (development aid; `esr crdgen` writes the files).
#![allow(clippy::unwrap_used, clippy::expect_used)]
fn main() {
    for crd in esr_api::crds().unwrap() {
        println!("---\n{}", serde_yaml_ng::to_string(&crd).unwrap());
    }
}
