use super::*;

fn cfg(
    length: usize,
    digits: usize,
    symbols: usize,
    no_upper: bool,
    allow_repeat: bool,
) -> PasswordConfig {
    PasswordConfig {
        length,
        digits,
        symbols,
        symbol_characters: DEFAULT_SYMBOLS.to_string(),
        no_upper,
        allow_repeat,
        encoding: PasswordEncoding::Raw,
        prefix: String::new(),
        suffix: String::new(),
    }
}

#[test]
fn defaults_follow_eso() {
    let c = PasswordConfig::from_spec(&PasswordSpec {
        length: 0,
        ..Default::default()
    })
    .unwrap();
    assert_eq!((c.length, c.digits, c.symbols), (24, 6, 6));
    assert_eq!(c.symbol_characters, DEFAULT_SYMBOLS);
    let c = PasswordConfig::from_spec(&PasswordSpec {
        length: 10,
        ..Default::default()
    })
    .unwrap();
    assert_eq!((c.digits, c.symbols), (2, 2));
    let c = PasswordConfig::from_spec(&PasswordSpec {
        length: 10,
        digits: Some(0),
        symbols: Some(5),
        ..Default::default()
    })
    .unwrap();
    assert_eq!((c.digits, c.symbols), (0, 5));
}

#[test]
fn charset_and_length_properties() {
    for _ in 0..200 {
        let p = generate_password(&cfg(32, 5, 7, false, false)).unwrap();
        assert_eq!(p.chars().count(), 32);
        assert_eq!(p.chars().filter(|c| c.is_ascii_digit()).count(), 5);
        assert_eq!(
            p.chars().filter(|c| DEFAULT_SYMBOLS.contains(*c)).count(),
            7
        );
        assert_eq!(p.chars().filter(|c| c.is_ascii_alphabetic()).count(), 20);
    }
    for _ in 0..100 {
        let p = generate_password(&cfg(20, 3, 0, true, true)).unwrap();
        assert!(
            p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{p}"
        );
    }
    let mut c = cfg(12, 0, 12, false, true);
    c.symbol_characters = "-_".to_string();
    let p = generate_password(&c).unwrap();
    assert!(p.chars().all(|ch| ch == '-' || ch == '_'), "{p}");
}

#[test]
fn no_repeats_without_allow_repeat() {
    for _ in 0..200 {
        let p = generate_password(&cfg(40, 10, 10, false, false)).unwrap();
        let mut seen = std::collections::HashSet::new();
        assert!(p.chars().all(|c| seen.insert(c)), "repeat in {p}");
    }
    // Exactly all ten digits, all different.
    let p = generate_password(&cfg(10, 10, 0, false, false)).unwrap();
    let mut d: Vec<char> = p.chars().collect();
    d.sort();
    assert_eq!(d.into_iter().collect::<String>(), "0123456789");
}

#[test]
fn impossible_requests_fail_like_go_password() {
    assert_eq!(
        generate_password(&cfg(5, 3, 3, false, true)),
        Err(PasswordError::ExceedsTotalLength)
    );
    assert_eq!(
        generate_password(&cfg(11, 11, 0, false, false)),
        Err(PasswordError::DigitsExceedsAvailable)
    );
    assert_eq!(
        generate_password(&cfg(30, 0, 0, true, false)),
        Err(PasswordError::LettersExceedsAvailable)
    );
    assert!(generate_password(&cfg(30, 0, 0, true, true)).is_ok());
    assert_eq!(
        PasswordConfig::from_spec(&PasswordSpec {
            length: 5,
            digits: Some(-1),
            ..Default::default()
        }),
        Err(PasswordError::Negative)
    );
}

#[test]
fn encodings_and_secret_keys() {
    assert_eq!(encode(b"foobar", PasswordEncoding::Raw), b"foobar");
    assert_eq!(encode(b"foob", PasswordEncoding::Base64), b"Zm9vYg==");
    assert_eq!(encode(&[0xfb, 0xff], PasswordEncoding::Base64url), b"-_8=");
    assert_eq!(
        encode(b"foobar", PasswordEncoding::Base32),
        b"MZXW6YTBOI======"
    );
    assert_eq!(encode(b"hi", PasswordEncoding::Hex), b"6869");
    let out = password(&PasswordSpec {
        length: 16,
        encoding: Some(PasswordEncoding::Hex),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), vec!["password"]);
    assert_eq!(out["password"].len(), 32);
    let out = password(&PasswordSpec {
        length: 16,
        secret_keys: Some(vec!["a".into(), "b".into()]),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(out.len(), 2);
    assert_ne!(out["a"], out["b"]);
    let dup = PasswordSpec {
        secret_keys: Some(vec!["a".into(), "a".into()]),
        ..Default::default()
    };
    assert_eq!(password(&dup), Err(PasswordError::SecretKeys));
}

#[test]
fn prefix_and_suffix_wrap_the_generated_password() {
    let spec: PasswordSpec = serde_json::from_value(serde_json::json!({
        "length": 12, "digits": 0, "symbols": 0, "prefix": "pre-", "suffix": "-suf"
    }))
    .unwrap();
    let c = PasswordConfig::from_spec(&spec).unwrap();
    assert_eq!((c.prefix.as_str(), c.suffix.as_str()), ("pre-", "-suf"));
    let out = password(&spec).unwrap();
    let p = String::from_utf8(out["password"].clone()).unwrap();
    assert_eq!(p.len(), 4 + 12 + 4, "{p}");
    let core = p
        .strip_prefix("pre-")
        .and_then(|r| r.strip_suffix("-suf"))
        .unwrap();
    assert!(core.chars().all(|ch| ch.is_ascii_alphabetic()), "{core}");
    // The encoding covers prefix and suffix too.
    let spec = PasswordSpec {
        length: 4,
        digits: Some(0),
        symbols: Some(0),
        prefix: Some("ab".into()),
        encoding: Some(PasswordEncoding::Hex),
        ..Default::default()
    };
    let hexed = password(&spec).unwrap()["password"].clone();
    assert!(hexed.starts_with(b"6162"), "{hexed:?}");
    assert_eq!(hexed.len(), 12);
}

#[test]
fn fake_returns_its_data() {
    let f = FakeSpec {
        controller: None,
        data: Some([("k".to_string(), "v".to_string())].into()),
    };
    assert_eq!(
        fake(&f),
        Generated::from([("k".to_string(), b"v".to_vec())])
    );
}

#[test]
fn length_is_bounded_and_long_passwords_are_generated_whole() {
    let max = esr_api::generators::MAX_PASSWORD_LENGTH;
    assert_eq!(
        PasswordConfig::from_spec(&PasswordSpec {
            length: max + 1,
            ..Default::default()
        }),
        Err(PasswordError::TooLong)
    );
    assert_eq!(
        PasswordConfig::from_spec(&PasswordSpec {
            length: 1_000_000,
            allow_repeat: true,
            ..Default::default()
        }),
        Err(PasswordError::TooLong)
    );
    let c = PasswordConfig::from_spec(&PasswordSpec {
        length: max,
        allow_repeat: true,
        ..Default::default()
    })
    .unwrap();
    let p = generate_password(&c).unwrap();
    assert_eq!(p.chars().count(), max as usize);
    assert_eq!(p.chars().filter(|c| c.is_ascii_digit()).count(), c.digits);
    assert_eq!(
        p.chars().filter(|c| DEFAULT_SYMBOLS.contains(*c)).count(),
        c.symbols
    );
    // huge digit/symbol counts are an error, not an overflow
    assert_eq!(
        generate_password(&cfg(10, usize::MAX, usize::MAX, false, true)),
        Err(PasswordError::ExceedsTotalLength)
    );
}

#[test]
fn characters_are_shuffled_not_grouped() {
    // letters, digits and symbols are drawn in that order and then shuffled: over many runs a
    // digit appears at the first position
    let first_is_digit = (0..200)
        .filter_map(|_| generate_password(&cfg(10, 5, 0, false, false)).ok())
        .any(|p| p.starts_with(|c: char| c.is_ascii_digit()));
    assert!(first_is_digit);
}

#[test]
fn without_repeats_overlapping_alphabets_never_repeat_or_hang() {
    // symbols that are also letters, and a symbol listed twice
    let mut c = cfg(30, 0, 4, false, false);
    c.symbol_characters = "aabcd!".to_string();
    for _ in 0..100 {
        match generate_password(&c) {
            Ok(p) => {
                let mut seen = std::collections::HashSet::new();
                assert!(p.chars().all(|ch| seen.insert(ch)), "repeat in {p}");
                assert_eq!(p.chars().count(), 30);
            }
            Err(e) => assert_eq!(e, PasswordError::SymbolsExceedsAvailable),
        }
    }
    c.symbol_characters = "aa".to_string();
    c.symbols = 2;
    c.length = 2;
    assert_eq!(
        generate_password(&c),
        Err(PasswordError::SymbolsExceedsAvailable)
    );
}
