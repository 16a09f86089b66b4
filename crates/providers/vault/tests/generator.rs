//! VaultDynamicSecret against a real OpenBao: `auth/token/create` issues a renewable token
//! lease offline; a refresh renews it instead of creating another token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use esr_api::generators::{VaultDynamicSecretResultType, VaultDynamicSecretSpec};
use esr_api::opaque::AnyJson;
use esr_provider_vault::GeneratorRequest;
use esr_provider_vault::generator::Lease;
use serde_json::json;

/// A marker unique to one spec, set as the created tokens' `meta`, so a test counts only its own
/// tokens on the shared server.
fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

fn spec(bao: &Bao, h: &Harness) -> VaultDynamicSecretSpec {
    let provider = token_spec(h, bao, json!({}));
    VaultDynamicSecretSpec {
        provider: serde_json::from_value(provider).unwrap(),
        path: "auth/token/create".into(),
        method: Some("POST".into()),
        parameters: Some(AnyJson(
            json!({"ttl": "1h", "renewable": true, "policies": ["default"],
                   "meta": {"esr-test": marker()}}),
        )),
        result_type: Some(VaultDynamicSecretResultType::Auth),
        ..Default::default()
    }
}

/// How many live tokens the server has (all tests').
async fn all_tokens(bao: &Bao) -> usize {
    bao.api("LIST", "auth/token/accessors", None).await["data"]["keys"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
}

/// How many live tokens carry `sp`'s marker (other tests create tokens on the same server).
async fn token_count(bao: &Bao, sp: &VaultDynamicSecretSpec) -> usize {
    let marker = sp.parameters.as_ref().unwrap().0["meta"]["esr-test"].clone();
    let accessors = bao.api("LIST", "auth/token/accessors", None).await["data"]["keys"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut n = 0;
    for a in accessors {
        let t = bao
            .api(
                "POST",
                "auth/token/lookup-accessor",
                Some(json!({"accessor": a})),
            )
            .await;
        if t["data"]["meta"]["esr-test"] == marker {
            n += 1;
        }
    }
    n
}

#[tokio::test]
async fn lease_is_renewed_not_reissued() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let sp = spec(&bao, &h);
    let req = GeneratorRequest {
        name: "gen",
        namespace: "ns",
        spec: &sp,
        kube: h.kube.clone(),
        recorder: h.recorder.clone(),
    };
    let (first, st) = h.provider.generate(&req, None).await.unwrap();
    let tok = s(&first["client_token"]);
    assert!(!tok.is_empty());
    assert_eq!(st.lease, Lease::Token);
    assert!(st.renewable);
    assert!(
        !format!("{st:?}").contains(&tok),
        "state Debug leaks the token"
    );
    let before = token_count(&bao, &sp).await;
    assert_eq!(before, 1, "the first generate created one token");

    let (second, st2) = h.provider.generate(&req, Some(&st)).await.unwrap();
    assert_eq!(second, first, "renewal returns the same credentials");
    assert_eq!(st2.renewals, 1);
    assert_eq!(h.recorder.count("GeneratorRequest"), 1);
    assert_eq!(h.recorder.count("RenewLease"), 1);
    assert_eq!(
        token_count(&bao, &sp).await,
        before,
        "no new token was created"
    );
    // the issued token is still valid
    let looked = bao
        .api("POST", "auth/token/lookup", Some(json!({"token": tok})))
        .await;
    assert_eq!(looked["data"]["renewable"], true);

    // Once the lease is gone, a refresh issues new credentials.
    bao.api("POST", "auth/token/revoke", Some(json!({"token": tok})))
        .await;
    let (third, st3) = h.provider.generate(&req, Some(&st2)).await.unwrap();
    assert_ne!(third["client_token"], first["client_token"]);
    assert_eq!(st3.renewals, 0);
    assert_eq!(h.recorder.count("GeneratorRequest"), 2);

    // generate_for keeps the state per generator + consumer.
    let a1 = h.provider.generate_for(&req, "es-a").await.unwrap();
    let a2 = h.provider.generate_for(&req, "es-a").await.unwrap();
    let b1 = h.provider.generate_for(&req, "es-b").await.unwrap();
    assert_eq!(a1, a2);
    assert_ne!(a1["client_token"], b1["client_token"]);
    assert_eq!(
        h.provider
            .generator_state("ns", "gen", "es-a")
            .map(|s| s.renewals),
        Some(1)
    );
}

#[tokio::test]
async fn data_result_from_a_non_lease_path() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let mut sp = spec(&bao, &h);
    let transit = unique("transit");
    bao.api(
        "POST",
        &format!("sys/mounts/{transit}"),
        Some(json!({"type": "transit"})),
    )
    .await;
    sp.path = format!("{transit}/random/16");
    sp.parameters = Some(AnyJson(json!({"format": "hex"})));
    sp.result_type = None;
    let req = GeneratorRequest {
        name: "rnd",
        namespace: "ns",
        spec: &sp,
        kube: h.kube.clone(),
        recorder: h.recorder.clone(),
    };
    let (d1, st) = h.provider.generate(&req, None).await.unwrap();
    assert_eq!(d1["random_bytes"].len(), 32);
    assert_eq!(st.lease, Lease::None);
    // not renewable: a refresh generates again
    let (d2, _) = h.provider.generate(&req, Some(&st)).await.unwrap();
    assert_ne!(d1, d2);
    // empty response is an error unless allowed
    let mut sp2 = sp.clone();
    sp2.path = format!("sys/mounts/{transit}/tune");
    sp2.method = Some("POST".into());
    sp2.parameters = Some(AnyJson(json!({"description": "x"})));
    let req2 = GeneratorRequest {
        spec: &sp2,
        ..req.clone()
    };
    let e = h.provider.generate(&req2, None).await.unwrap_err();
    assert!(e.message().contains("got empty response"), "{e}");
}

/// Waits (bounded) until the token's remaining TTL is below `below` seconds.
async fn wait_ttl_below(bao: &Bao, token: &str, below: u64) {
    for _ in 0..100 {
        let looked = bao
            .api("POST", "auth/token/lookup", Some(json!({"token": token})))
            .await;
        if looked["data"]["ttl"].as_u64().unwrap() < below {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the token TTL did not go below {below}s");
}

#[tokio::test]
async fn max_ttl_or_spec_change_issues_new_credentials() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let mut sp = spec(&bao, &h);
    // The max TTL caps the lease: a renewal cannot grant the full duration again.
    sp.parameters = Some(AnyJson(json!({
        "ttl": "1h", "explicit_max_ttl": "30m", "renewable": true, "policies": ["default"]
    })));
    let req = GeneratorRequest {
        name: "capped",
        namespace: "ns",
        spec: &sp,
        kube: h.kube.clone(),
        recorder: h.recorder.clone(),
    };
    let (first, st) = h.provider.generate(&req, None).await.unwrap();
    assert_eq!(st.lease_duration, 1800);
    // Let the max TTL come closer (Vault rounds to whole seconds).
    wait_ttl_below(&bao, &s(&first["client_token"]), 1797).await;
    let (second, st2) = h.provider.generate(&req, Some(&st)).await.unwrap();
    assert_eq!(h.recorder.count("RenewLease"), 1, "renewal was tried");
    assert!(
        second["client_token"] != first["client_token"],
        "a lease at its max TTL is replaced"
    );
    assert_eq!(st2.renewals, 0);
    assert_eq!(h.recorder.count("GeneratorRequest"), 2);

    // A changed spec issues new credentials without trying to renew the old lease.
    let mut sp2 = spec(&bao, &h);
    sp2.parameters = Some(AnyJson(
        json!({"ttl": "2h", "renewable": true, "policies": ["default"]}),
    ));
    let req2 = GeneratorRequest {
        spec: &sp2,
        ..req.clone()
    };
    let (third, st3) = h.provider.generate(&req2, Some(&st2)).await.unwrap();
    assert!(third["client_token"] != second["client_token"]);
    assert_eq!(st3.lease_duration, 7200);
    assert_eq!(
        h.recorder.count("RenewLease"),
        1,
        "no renewal on a spec change"
    );
    assert_eq!(h.recorder.count("GeneratorRequest"), 3);
}

#[tokio::test]
async fn generator_retry_settings_reach_the_transport() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let mut sp = spec(&bao, &h);
    // An invalid retryInterval is reported before any request.
    sp.retry_settings = Some(esr_api::v1::SecretStoreRetrySettings {
        max_retries: Some(1),
        retry_interval: Some("soon".into()),
    });
    let req = GeneratorRequest {
        name: "retry",
        namespace: "ns",
        spec: &sp,
        kube: h.kube.clone(),
        recorder: h.recorder.clone(),
    };
    let e = h.provider.generate(&req, None).await.unwrap_err();
    assert!(e.message().contains("retryInterval"), "{e}");
    assert_eq!(h.recorder.total(), 0);
}

/// `method: LIST` lists (e.g. the token accessors) and, as in ESO, sends no body even when
/// `parameters` are set; the result has nothing to renew.
#[tokio::test]
async fn list_method_sends_no_body() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let mut sp = spec(&bao, &h);
    sp.path = "auth/token/accessors".into();
    sp.method = Some("list".into());
    sp.result_type = Some(VaultDynamicSecretResultType::Data);
    let req = GeneratorRequest {
        name: "lister",
        namespace: "ns",
        spec: &sp,
        kube: h.kube.clone(),
        recorder: h.recorder.clone(),
    };
    // The token count is the server's, shared with other tests that may create tokens at the
    // same moment: LIST must leave it unchanged in at least one of three tries (a LIST that
    // created a token would change it every time).
    let mut counts = vec![];
    for _ in 0..3 {
        let before = all_tokens(&bao).await;
        let (data, st) = h.provider.generate(&req, None).await.unwrap();
        let keys: serde_json::Value = serde_json::from_slice(&data["keys"]).unwrap();
        assert!(keys.as_array().is_some_and(|k| !k.is_empty()), "{keys}");
        assert_eq!(st.lease, Lease::None);
        let after = all_tokens(&bao).await;
        if after == before {
            return;
        }
        counts.push((before, after));
    }
    panic!("LIST created a token each time: {counts:?}");
}
