//! The template parser and executor on arbitrary text, with every limit on: no panic, and every
//! execution ends (steps, output, memory budget, deadline) with output or an error.
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use esr_template::limits::Limits;
use esr_template::{ExecOptions, RenderLimits, Template, eso_funcs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let funcs = eso_funcs();
    let Ok(t) = Template::parse("key", &text, funcs) else {
        return;
    };
    let opts = ExecOptions {
        missingkey_error: true,
        redact: true,
        limits: Limits {
            max_steps: 20_000,
            max_output_bytes: 256 * 1024,
            max_template_depth: 50,
        },
        bounds: RenderLimits {
            max_bytes: 32 * 1024 * 1024,
            deadline: Instant::now().checked_add(Duration::from_secs(2)),
            cancel: None,
        },
    };
    let values = BTreeMap::from([
        ("a".to_string(), b"1".to_vec()),
        ("b".to_string(), br#"{"c":[1,2]}"#.to_vec()),
        ("bin".to_string(), vec![0xff, 0xfe, 0x00]),
    ]);
    if let Ok(out) = t.execute_data(funcs, &values, &opts) {
        assert!(out.len() <= opts.limits.max_output_bytes);
    }
});
