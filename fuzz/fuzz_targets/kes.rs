//! The KES → ESO converter (`esr migrate kes`) on arbitrary YAML: parse, convert and write back;
//! no panic.
#![no_main]

use esr_migrate::{Document, Options, convert, parse_yaml_stream, to_yaml_stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(values) = parse_yaml_stream(text) else {
        return;
    };
    let docs: Vec<Document> = values
        .into_iter()
        .enumerate()
        .map(|(index, value)| Document {
            source: "fuzz.yaml".to_string(),
            index,
            value,
        })
        .collect();
    let opts = Options {
        vault_addr: Some("https://vault.example:8200".to_string()),
        aws_region: Some("eu-west-1".to_string()),
        ..Options::default()
    };
    let conv = convert(&docs, &opts);
    let _ = to_yaml_stream(conv.all_manifests());
});
