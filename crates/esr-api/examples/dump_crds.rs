//! Prints every CRD as multi-document YAML, or, given a directory, writes one file per CRD
//! exactly as `esr crdgen` does (useful when the `esr` binary itself does not build).
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let out = std::env::args().nth(1);
    for crd in esr_api::crds().unwrap() {
        match &out {
            Some(dir) => {
                let path = std::path::Path::new(dir).join(esr_api::crd_file_name(&crd));
                std::fs::write(&path, esr_api::crd_file_content(&crd).unwrap()).unwrap();
            }
            None => println!("---\n{}", yaml_serde::to_string(&crd).unwrap()),
        }
    }
}
