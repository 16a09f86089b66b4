use super::*;
use esr_provider::ProviderError;
use esr_provider::keys::convert_key;

fn m(pairs: &[(&str, &str)]) -> DataMap {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

struct Upper;
impl KeyTransformer for Upper {
    fn transform_key(&self, template: &str, key: &str) -> Result<String, PipelineError> {
        if template == "fail" {
            return Err(PipelineError::Transform(format!(
                "failed to execute template for key {key:?}"
            )));
        }
        Ok(format!("{}{}", template, key.to_uppercase()))
    }
}

#[test]
fn convert_default_replaces_invalid_chars() {
    assert_eq!(
        convert_key(ConversionStrategy::Default, "a/b c@d-e.f_g"),
        "a_b_c_d-e.f_g"
    );
    assert_eq!(convert_key(ConversionStrategy::Default, "ünï"), "ünï");
}

#[test]
fn convert_unicode_escapes_code_points() {
    assert_eq!(convert_key(ConversionStrategy::Unicode, "a/b"), "a_U002f_b");
    assert_eq!(convert_key(ConversionStrategy::Unicode, "x😀"), "x_U1f600_");
}

#[test]
fn convert_collision_is_error() {
    let err = convert_keys(
        ConversionStrategy::Default,
        m(&[("a/b", "1"), ("a_b", "2")]),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "secret name collision during conversion: a_b"
    );
}

#[test]
fn validate_drops_empty_and_rejects_bad() {
    let out = validate_keys(m(&[("", "x"), ("ok", "y")])).unwrap();
    assert_eq!(out, m(&[("ok", "y")]));
    let err = validate_keys(m(&[("a/b", "1")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "key has invalid character /, only alphanumeric, '-', '.' and '_' are allowed: a/b"
    );
    let long = "k".repeat(254);
    let err = validate_keys(m(&[(&long, "1")])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("key has length 254 but max is 253")
    );
}

#[test]
fn decoding_strategies() {
    assert_eq!(
        decode_value(DecodingStrategy::Base64, "k", b"aGk=".to_vec()).unwrap(),
        b"hi"
    );
    assert!(
        decode_value(DecodingStrategy::Base64, "k", b"aGk".to_vec()).is_err(),
        "padding required"
    );
    assert_eq!(
        decode_value(DecodingStrategy::Base64Url, "k", b"-_8=".to_vec()).unwrap(),
        vec![0xfb, 0xff]
    );
    assert!(decode_value(DecodingStrategy::Base64, "k", b"-_8=".to_vec()).is_err());
    // the error names the key and the strategy, never a byte or offset of the value
    for (strategy, name) in [
        (DecodingStrategy::Base64, "Base64"),
        (DecodingStrategy::Base64Url, "Base64URL"),
    ] {
        let e = decode_value(strategy, "db-pass", b"aGVsbG8!".to_vec()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("error decoding key db-pass: value is not valid {name}")
        );
    }
    assert_eq!(
        decode_value(DecodingStrategy::Auto, "k", b"-_8=".to_vec()).unwrap(),
        vec![0xfb, 0xff]
    );
    assert_eq!(
        decode_value(DecodingStrategy::Auto, "k", b"aGk=".to_vec()).unwrap(),
        b"hi"
    );
    assert_eq!(
        decode_value(DecodingStrategy::Auto, "k", b"not base64!".to_vec()).unwrap(),
        b"not base64!"
    );
    assert_eq!(
        decode_value(DecodingStrategy::None, "k", b"aGk=".to_vec()).unwrap(),
        b"aGk="
    );
}

#[test]
fn null_byte_policy() {
    let d: DataMap = [("k".to_string(), vec![b'a', 0])].into_iter().collect();
    assert!(check_null_bytes(NullBytePolicy::Ignore, &d).is_ok());
    assert_eq!(
        check_null_bytes(NullBytePolicy::Fail, &d).unwrap_err(),
        PipelineError::NullByte("k".to_string())
    );
}

#[test]
fn regexp_go_expansion() {
    let out = rewrite_regexp(
        "^db-(.*)$",
        "database_$1",
        m(&[("db-user", "u"), ("other", "o")]),
    )
    .unwrap();
    assert_eq!(out, m(&[("database_user", "u"), ("other", "o")]));
    // `$1x` is the group named "1x", which does not exist → empty (Go semantics).
    let out = rewrite_regexp("^(a)(b)$", "$1x", m(&[("ab", "v")])).unwrap();
    assert_eq!(out, m(&[("", "v")]));
    let out = rewrite_regexp("^(a)(b)$", "${1}x", m(&[("ab", "v")])).unwrap();
    assert_eq!(out, m(&[("ax", "v")]));
    let out = rewrite_regexp(
        "^(?P<p>[a-z]+)-(?P<s>[0-9]+)$",
        "${s}_${p}",
        m(&[("abc-12", "v")]),
    )
    .unwrap();
    assert_eq!(out, m(&[("12_abc", "v")]));
    let out = rewrite_regexp("/", "_", m(&[("a/b/c", "v")])).unwrap();
    assert_eq!(out, m(&[("a_b_c", "v")]));
    let out = rewrite_regexp("a", "$$", m(&[("bab", "v")])).unwrap();
    assert_eq!(out, m(&[("b$b", "v")]));
    assert!(matches!(
        rewrite_regexp("(", "x", m(&[("a", "v")])),
        Err(PipelineError::RegexCompile(_))
    ));
}

#[test]
fn merge_extract_with_priority() {
    let input = m(&[
        ("a", r#"{"x":"1","y":"a"}"#),
        ("b", r#"{"y":"b","n":2,"t":true,"o":{"z":1,"a":2}}"#),
    ]);
    let out = rewrite_merge(
        "",
        &["a".to_string()],
        PriorityPolicy::Strict,
        ConflictPolicy::Ignore,
        MergeStrategy::Extract,
        input.clone(),
    )
    .unwrap();
    // "a" has priority, so it is merged last and wins.
    assert_eq!(out.get("y").unwrap(), b"a");
    assert_eq!(out.get("x").unwrap(), b"1");
    assert_eq!(out.get("n").unwrap(), b"2");
    assert_eq!(out.get("t").unwrap(), b"true");
    assert_eq!(out.get("o").unwrap(), br#"{"a":2,"z":1}"#);
    let err = rewrite_merge(
        "",
        &[],
        PriorityPolicy::Strict,
        ConflictPolicy::Error,
        MergeStrategy::Extract,
        input,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "merge failed with conflicts: y");
}

#[test]
fn merge_priority_policy_and_json() {
    let input = m(&[("a", r#"{"x":"1"}"#)]);
    let err = rewrite_merge(
        "",
        &["missing".to_string()],
        PriorityPolicy::Strict,
        ConflictPolicy::Error,
        MergeStrategy::Extract,
        input.clone(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "merge failed with key \"missing\" not found in input map"
    );
    let ok = rewrite_merge(
        "",
        &["missing".to_string()],
        PriorityPolicy::IgnoreNotFound,
        ConflictPolicy::Error,
        MergeStrategy::Extract,
        input.clone(),
    )
    .unwrap();
    assert_eq!(ok, m(&[("x", "1")]));
    let err = rewrite_merge(
        "",
        &[],
        PriorityPolicy::Strict,
        ConflictPolicy::Error,
        MergeStrategy::Json,
        input.clone(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "merge failed with missing 'into' field");
    let out = rewrite_merge(
        "all",
        &[],
        PriorityPolicy::Strict,
        ConflictPolicy::Error,
        MergeStrategy::Json,
        input,
    )
    .unwrap();
    assert_eq!(out, m(&[("a", r#"{"x":"1"}"#), ("all", r#"{"x":"1"}"#)]));
    let err = rewrite_merge(
        "",
        &[],
        PriorityPolicy::Strict,
        ConflictPolicy::Error,
        MergeStrategy::Extract,
        m(&[("a", "nope")]),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("merge failed with failed to unmarshal JSON")
    );
}

#[test]
fn rewrite_chain_in_order_with_index_in_error() {
    let ops = vec![
        Rewrite::Regexp {
            source: "^pre-".to_string(),
            target: "".to_string(),
        },
        Rewrite::Transform {
            template: "x_".to_string(),
        },
    ];
    let out = rewrite_map(&ops, &Upper, m(&[("pre-a", "1"), ("b", "2")])).unwrap();
    assert_eq!(out, m(&[("x_A", "1"), ("x_B", "2")]));
    let ops = vec![
        Rewrite::Regexp {
            source: "a".to_string(),
            target: "b".to_string(),
        },
        Rewrite::Transform {
            template: "fail".to_string(),
        },
    ];
    let err = rewrite_map(&ops, &Upper, m(&[("a", "1")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed rewrite operation[1]: transform failed with failed to execute template for key \"b\""
    );
}

#[test]
fn data_from_chain_converts_only_without_rewrite() {
    let opts = DataFromOptions {
        conversion: ConversionStrategy::Default,
        ..Default::default()
    };
    let out = process_data_from_map(&opts, &Upper, m(&[("a/b", "1")])).unwrap();
    assert_eq!(out, m(&[("a_b", "1")]));
    let opts = DataFromOptions {
        rewrite: vec![Rewrite::Regexp {
            source: "x".to_string(),
            target: "y".to_string(),
        }],
        ..Default::default()
    };
    let err = process_data_from_map(&opts, &Upper, m(&[("a/b", "1")]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid secret keys (TIP: use rewrite or conversionStrategy to change keys): key has invalid character /, only alphanumeric, '-', '.' and '_' are allowed: a/b"
    );
    let opts = DataFromOptions {
        decoding: DecodingStrategy::Base64,
        ..Default::default()
    };
    let out = process_data_from_map(&opts, &Upper, m(&[("k", "aGk=")])).unwrap();
    assert_eq!(out, m(&[("k", "hi")]));
    let err = process_data_from_map(&opts, &Upper, m(&[("k", "***")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("error applying decoding strategy Base64 to data: error decoding key k"),
        "{err}"
    );
    let opts = DataFromOptions {
        null_bytes: NullBytePolicy::Fail,
        decoding: DecodingStrategy::Base64,
        ..Default::default()
    };
    assert!(
        process_data_from_map(&opts, &Upper, m(&[("k", "AA==")]))
            .unwrap_err()
            .to_string()
            .contains("null byte")
    );
}

#[test]
fn assemble_order_and_overrides() {
    let out = assemble(
        vec![
            DataFromResult {
                kind: DataFromKind::Extract,
                result: EntryResult::Ok(m(&[("a", "1"), ("b", "1")])),
            },
            DataFromResult {
                kind: DataFromKind::Find,
                result: EntryResult::Ok(m(&[("b", "2"), ("c", "2")])),
            },
        ],
        vec![DataResult {
            secret_key: "c".to_string(),
            remote_key: "rk".to_string(),
            result: EntryResult::Ok(b"3".to_vec()),
        }],
        false,
    )
    .unwrap();
    assert_eq!(out.data, m(&[("a", "1"), ("b", "2"), ("c", "3")]));
    assert!(out.missing.is_empty());
}

#[test]
fn assemble_not_found_by_deletion_policy() {
    let df = || {
        vec![DataFromResult {
            kind: DataFromKind::Extract,
            result: EntryResult::NotFound(ProviderError::not_found().into()),
        }]
    };
    let d = || {
        vec![DataResult {
            secret_key: "k".into(),
            remote_key: "remote".into(),
            result: EntryResult::NotFound(ProviderError::not_found().into()),
        }]
    };
    let out = assemble(df(), d(), false).unwrap();
    assert!(out.data.is_empty());
    assert_eq!(
        out.missing,
        vec![
            MissingEvent {
                message: "secret does not exist at provider using spec.dataFrom[0]".into()
            },
            MissingEvent {
                message: "secret does not exist at provider using spec.dataFrom[0] (key=remote)"
                    .into()
            },
        ]
    );
    assert_eq!(
        assemble(df(), vec![], true).unwrap_err().to_string(),
        "error processing spec.dataFrom[0].extract, err: Secret does not exist"
    );
    assert_eq!(
        assemble(vec![], d(), true).unwrap_err().to_string(),
        "error processing spec.data[0] (key: remote), err: Secret does not exist"
    );
    let err = assemble(
        vec![DataFromResult {
            kind: DataFromKind::Find,
            result: EntryResult::Err(ProviderError::transient("boom").into()),
        }],
        vec![],
        false,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "error processing spec.dataFrom[0].find, err: boom"
    );
    // The provider's kind survives the wrapping.
    assert_eq!(err.metric_label(), "transient");
}

#[test]
fn data_value_chain() {
    assert_eq!(
        process_data_value(
            "k",
            DecodingStrategy::Base64,
            NullBytePolicy::Ignore,
            b"aGk=".to_vec()
        )
        .unwrap(),
        b"hi"
    );
    assert!(
        process_data_value("k", DecodingStrategy::None, NullBytePolicy::Fail, vec![0]).is_err()
    );
}
