//! Vault/OpenBao end to end: `esr controller` against esr-testkit plus a real OpenBao dev server
//! (ClusterSecretStore with AppRole, ExternalSecrets, rotation picked up), and `esr render`
//! against OpenBao. Run with `scripts/test-servers.sh cargo nextest run -p esr-e2e --test vault`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::process::Command;

use es_support::*;
use esr_e2e::{Env, esr_binary};
use serde_json::{Value, json};

struct Bao {
    addr: String,
    token: String,
}

fn bao() -> Option<Bao> {
    match std::env::var("ESR_TEST_VAULT_ADDR") {
        Ok(addr) if !addr.is_empty() => Some(Bao {
            addr,
            token: std::env::var("ESR_TEST_VAULT_TOKEN").unwrap_or_else(|_| "root".into()),
        }),
        _ => {
            if std::env::var("ESR_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!("ESR_TEST_VAULT_ADDR is not set but ESR_REQUIRE_SERVERS=1");
            }
            println!("skipped: ESR_TEST_VAULT_ADDR is not set (run under scripts/test-servers.sh)");
            None
        }
    }
}

impl Bao {
    /// One admin call with the root token, through curl (keeps e2e free of an HTTP client dep).
    fn api(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-f", "-X", method, "-H"])
            .arg(format!("X-Vault-Token: {}", self.token))
            .arg(format!("{}/v1/{path}", self.addr));
        if let Some(b) = body {
            cmd.args(["-H", "Content-Type: application/json", "-d"])
                .arg(b.to_string());
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{method} {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if out.stdout.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&out.stdout).unwrap()
        }
    }

    /// A KV v2 mount, a read policy and an AppRole role; returns (mount, approle path, role_id, secret_id).
    fn setup(&self, run: &str) -> (String, String, String, String) {
        let mount = format!("kv{run}");
        let ar = format!("approle{run}");
        self.api(
            "POST",
            &format!("sys/mounts/{mount}"),
            Some(json!({"type": "kv", "options": {"version": "2"}})),
        );
        self.api(
            "PUT",
            &format!("sys/policies/acl/{mount}-read"),
            Some(json!({"policy": format!(
                "path \"{mount}/data/*\" {{ capabilities = [\"read\"] }}\npath \"{mount}/metadata/*\" {{ capabilities = [\"read\", \"list\"] }}"
            )})),
        );
        self.api(
            "POST",
            &format!("sys/auth/{ar}"),
            Some(json!({"type": "approle"})),
        );
        self.api(
            "POST",
            &format!("auth/{ar}/role/esr"),
            Some(json!({"token_policies": [format!("{mount}-read")], "token_ttl": "1h"})),
        );
        let role_id =
            self.api("GET", &format!("auth/{ar}/role/esr/role-id"), None)["data"]["role_id"]
                .as_str()
                .unwrap()
                .to_string();
        let secret_id = self.api(
            "POST",
            &format!("auth/{ar}/role/esr/secret-id"),
            Some(json!({})),
        )["data"]["secret_id"]
            .as_str()
            .unwrap()
            .to_string();
        (mount, ar, role_id, secret_id)
    }

    fn put(&self, mount: &str, key: &str, data: Value) {
        self.api(
            "POST",
            &format!("{mount}/data/{key}"),
            Some(json!({"data": data})),
        );
    }
}

/// `externalsecret_provider_api_calls_count` for `HashiCorp/Vault`, one call and status.
fn vault_calls(metrics: &str, call: &str, status: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("externalsecret_provider_api_calls_count")
                && l.contains(r#"provider="HashiCorp/Vault""#)
                && l.contains(&format!(r#"call="{call}""#))
                && l.contains(&format!(r#"status="{status}""#))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `esr render -f <manifest>`: its standard output and error (the test fails when render fails).
fn esr_render(manifest: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.yaml");
    std::fs::write(&file, manifest).unwrap();
    let out = Command::new(esr_binary().unwrap())
        .args(["render", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "esr render failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

fn metrics_text(addr: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "-f"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

fn vault_css(name: &str, bao: &Bao, mount: &str, ar: &str, role_id: &str, ns: &str) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
        "metadata": {"name": name},
        "spec": {"provider": {"vault": {
            "server": bao.addr, "path": mount, "version": "v2",
            "auth": {"appRole": {"path": ar, "roleId": role_id,
                                 "secretRef": {"name": "approle", "key": "secret-id", "namespace": ns}}}
        }}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_syncs_from_openbao_with_approle_and_picks_up_rotation() {
    let Some(bao) = bao() else { return };
    let run = run_id();
    let (mount, ar, role_id, secret_id) = bao.setup(&run);
    bao.put(&mount, "app/db", json!({"user": "alice", "pass": "v1"}));
    bao.put(&mount, "app/cache", json!({"token": "t1"}));

    let env = Env::start().await.unwrap();
    let ns = env.namespace("vault").await.unwrap();
    let esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "approle"},
               "stringData": {"secret-id": secret_id}}),
    )
    .await;
    let store = format!("vault-{run}");
    apply(
        &env,
        "",
        vault_css(&store, &bao, &mount, &ar, &role_id, &ns),
    )
    .await;
    wait_condition(&env, "ClusterSecretStore", "", &store, "True", "Valid").await;
    apply(
        &env,
        &ns,
        es(
            "db",
            json!({
                "refreshInterval": "1s",
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
                "target": {"name": "db"},
                "data": [{"secretKey": "username", "remoteRef": {"key": "app/db", "property": "user"}}],
                "dataFrom": [{"extract": {"key": "app/db"}}, {"find": {"path": "app", "name": {"regexp": "cache"}}}]
            }),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "db",
        &[
            ("username", "alice"),
            ("user", "alice"),
            ("pass", "v1"),
            ("app_cache", r#"{"token":"t1"}"#),
        ],
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "db", "True", "SecretSynced").await;

    // Rotation in OpenBao is picked up on the next refresh.
    bao.put(&mount, "app/db", json!({"user": "alice", "pass": "v2"}));
    wait_secret_data(
        &env,
        &ns,
        "db",
        &[
            ("username", "alice"),
            ("user", "alice"),
            ("pass", "v2"),
            ("app_cache", r#"{"token":"t1"}"#),
        ],
    )
    .await;

    // One AppRole login served the store validation and every refresh (token cached per store).
    let metrics = metrics_text(esr.metrics_addr.as_deref().unwrap());
    let logins = vault_calls(&metrics, "Login", "success");
    let reads = vault_calls(&metrics, "ReadSecretData", "success");
    println!("vault-controller-scenario: logins={logins} reads={reads}");
    assert_eq!(logins, 1.0, "{metrics}");
    assert!(reads >= 4.0, "{metrics}");

    // A store with a wrong AppRole secret-id is not Ready.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "approle-bad"},
               "stringData": {"secret-id": "wrong"}}),
    )
    .await;
    let mut bad = vault_css(&format!("bad-{run}"), &bao, &mount, &ar, &role_id, &ns);
    bad["spec"]["provider"]["vault"]["auth"]["appRole"]["secretRef"]["name"] = json!("approle-bad");
    apply(&env, "", bad).await;
    let st = wait_condition(
        &env,
        "ClusterSecretStore",
        "",
        &format!("bad-{run}"),
        "False",
        "InvalidProviderConfig",
    )
    .await;
    assert!(!st.to_string().contains("wrong"), "credential leaked: {st}");
    env.cleanup().await.unwrap();
}

#[test]
fn render_against_openbao() {
    let Some(bao) = bao() else { return };
    let run = run_id();
    let (mount, ar, role_id, secret_id) = bao.setup(&run);
    bao.put(
        &mount,
        "svc/api",
        json!({"key": "k1", "nested": {"a": "b"}}),
    );
    let manifest = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: approle, namespace: esr-system}}
stringData: {{secret-id: "{secret_id}"}}
---
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {{name: bao}}
spec:
  provider:
    vault:
      server: "{addr}"
      path: {mount}
      auth:
        appRole:
          path: {ar}
          roleId: "{role_id}"
          secretRef: {{name: approle, key: secret-id, namespace: esr-system}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: api, namespace: default}}
spec:
  secretStoreRef: {{kind: ClusterSecretStore, name: bao}}
  target: {{name: api}}
  data:
    - secretKey: key
      remoteRef: {{key: svc/api, property: key}}
    - secretKey: a
      remoteRef: {{key: svc/api, property: nested.a}}
"#,
        addr = bao.addr
    );
    let (stdout, _stderr) = esr_render(&manifest);
    // base64("k1") = "azE=", base64("b") = "Yg=="
    assert!(stdout.contains("key: azE="), "{stdout}");
    assert!(stdout.contains("a: Yg=="), "{stdout}");
    assert!(
        !stdout.contains(&secret_id),
        "secret-id leaked into the output"
    );
}

/// A private `bao server -dev` this test may stop (the shared one must stay up).
struct OwnBao {
    child: std::process::Child,
    bao: Bao,
}

impl Drop for OwnBao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn own_bao() -> Option<OwnBao> {
    let bin = std::env::var("ESR_TEST_BAO_BIN").ok()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args(["server", "-dev", "-dev-root-token-id=root"])
        .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("http://127.0.0.1:{port}");
    for _ in 0..300 {
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null"])
            .arg(format!("{addr}/v1/sys/health"))
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(OwnBao {
        child,
        bao: Bao {
            addr,
            token: "root".into(),
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_server_keeps_the_previous_secret() {
    let Some(_shared) = bao() else { return };
    let Some(mut own) = own_bao() else {
        println!("skipped: ESR_TEST_BAO_BIN is not set");
        return;
    };
    own.bao.put("secret", "app", json!({"pw": "v1"}));
    let env = Env::start().await.unwrap();
    let ns = env.namespace("vault-stop").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
               "stringData": {"token": "root"}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "bao"},
               "spec": {"provider": {"vault": {"server": own.bao.addr, "path": "secret",
                        "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}}}}),
    )
    .await;
    wait_condition(&env, "SecretStore", &ns, "bao", "True", "Valid").await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({"refreshInterval": "1s", "secretStoreRef": {"name": "bao"},
                   "target": {"name": "app"},
                   "data": [{"secretKey": "pw", "remoteRef": {"key": "app", "property": "pw"}}]}),
        ),
    )
    .await;
    wait_secret_data(&env, &ns, "app", &[("pw", "v1")]).await;
    // Stop the server: the ExternalSecret turns Ready=False and the Secret stays as it was.
    let _ = own.child.kill();
    let _ = own.child.wait();
    let es_obj = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        "False",
        "SecretSyncedError",
    )
    .await;
    assert!(
        !es_obj.to_string().contains("\"root\""),
        "token leaked: {es_obj}"
    );
    let kept = secret(&env, &ns, "app").await.unwrap();
    assert_eq!(decoded(&kept).get("pw").map(String::as_str), Some("v1"));
    env.cleanup().await.unwrap();
}

/// Applies a `generators.external-secrets.io/v1alpha1` object (namespaced unless ClusterGenerator).
async fn apply_generator(env: &Env, ns: &str, mut obj: Value) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    env.scope_object(&mut obj);
    let kind = obj["kind"].as_str().unwrap().to_string();
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let gvk = GroupVersionKind::gvk("generators.external-secrets.io", "v1alpha1", &kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_ascii_lowercase()));
    let api: Api<DynamicObject> = if kind == "ClusterGenerator" {
        Api::all_with(env.client(), &ar)
    } else {
        Api::namespaced_with(env.client(), ns, &ar)
    };
    api.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {kind}/{name}: {e}"));
}

impl Bao {
    /// Number of tokens (accessors) on the server.
    fn token_count(&self) -> usize {
        self.api("LIST", "auth/token/accessors", None)["data"]["keys"]
            .as_array()
            .map(Vec::len)
            .unwrap()
    }

    /// `auth/token/lookup` of a token (root token).
    fn lookup(&self, token: &str) -> Value {
        self.api("POST", "auth/token/lookup", Some(json!({"token": token})))["data"].clone()
    }
}

/// A token-issuing VaultDynamicSecret spec: `auth/token/create` with a renewable token of `ttl`,
/// authenticated with the token in Secret `vault-token` of the ExternalSecret's namespace.
fn token_issuer_spec(bao: &Bao, ttl: &str) -> Value {
    json!({
        "path": "auth/token/create",
        "method": "POST",
        "parameters": {"ttl": ttl, "renewable": true, "policies": ["default"]},
        "resultType": "Auth",
        "provider": {
            "server": bao.addr,
            "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}
        }
    })
}

/// Waits until the token's `last_renewal_time` is later than `after`; returns it.
async fn wait_renewed_after(bao: &Bao, token: &str, after: i64) -> i64 {
    esr_e2e::wait_for("the generated token to be renewed", TIMEOUT, || async {
        let t = bao.lookup(token)["last_renewal_time"].as_i64().unwrap_or(0);
        (t > after).then_some(t)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vault_dynamic_secret_token_is_renewed_not_reissued() {
    let Some(_shared) = bao() else { return };
    // A private server, so the token count is exactly what this scenario created.
    let Some(own) = own_bao() else {
        println!("skipped: ESR_TEST_BAO_BIN is not set");
        return;
    };
    let bao = &own.bao;
    // esr's own token: may create and renew tokens, nothing else (the documented policy).
    bao.api(
        "PUT",
        "sys/policies/acl/esr-token-issuer",
        Some(json!({"policy": "path \"auth/token/create\" { capabilities = [\"create\", \"update\"] }\npath \"auth/token/renew\" { capabilities = [\"update\"] }"})),
    );
    let esr_token = bao.api(
        "POST",
        "auth/token/create",
        Some(json!({"policies": ["esr-token-issuer"], "ttl": "2h"})),
    )["auth"]["client_token"]
        .as_str()
        .unwrap()
        .to_string();
    let base = bao.token_count();

    let env = Env::start().await.unwrap();
    let ns = env.namespace("vault-dyn").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
               "stringData": {"token": esr_token}}),
    )
    .await;
    apply_generator(
        &env,
        &ns,
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "VaultDynamicSecret",
               "metadata": {"name": "issuer"}, "spec": token_issuer_spec(bao, "1h")}),
    )
    .await;
    let cluster_gen = format!("issuer-{}", run_id());
    apply_generator(
        &env,
        "",
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
               "metadata": {"name": cluster_gen},
               "spec": {"kind": "VaultDynamicSecret",
                        "generator": {"vaultDynamicSecretSpec": token_issuer_spec(bao, "90m")}}}),
    )
    .await;
    let gref = |kind: &str, name: &str| json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind, "name": name});
    apply(
        &env,
        &ns,
        es(
            "tokens",
            json!({
                "refreshInterval": "1s",
                "target": {"name": "tokens"},
                "dataFrom": [
                    {"sourceRef": {"generatorRef": gref("VaultDynamicSecret", "issuer")}},
                    {"sourceRef": {"generatorRef": gref("ClusterGenerator", &cluster_gen)},
                     "rewrite": [{"regexp": {"source": "^(.*)$", "target": "cluster_$1"}}]}
                ]
            }),
        ),
    )
    .await;
    let first = esr_e2e::wait_for("the tokens Secret", TIMEOUT, || async {
        let d = decoded(&secret(&env, &ns, "tokens").await?);
        (d.get("client_token").is_some_and(|t| !t.is_empty())
            && d.get("cluster_client_token").is_some_and(|t| !t.is_empty()))
        .then_some(d)
    })
    .await
    .unwrap();
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "tokens",
        "True",
        "SecretSynced",
    )
    .await;
    let tok = first["client_token"].clone();
    let ctok = first["cluster_client_token"].clone();
    assert_ne!(tok, ctok);
    assert_eq!(first["renewable"], "true");
    assert_eq!(first["cluster_lease_duration"], "5400");
    assert_eq!(bao.lookup(&tok)["creation_ttl"], 3600);

    // Two renewals of each token observed in OpenBao (one per refresh)...
    let r1 = wait_renewed_after(bao, &tok, 0).await;
    wait_renewed_after(bao, &tok, r1).await;
    let c1 = wait_renewed_after(bao, &ctok, 0).await;
    wait_renewed_after(bao, &ctok, c1).await;
    // ...while the Secret keeps the same tokens and no other token was created.
    let now = decoded(&secret(&env, &ns, "tokens").await.unwrap());
    assert!(now["client_token"] == tok, "the token was re-issued");
    assert!(
        now["cluster_client_token"] == ctok,
        "the token was re-issued"
    );
    assert_eq!(bao.token_count(), base + 2, "esr minted extra tokens");
    // The generator's calls are counted like the provider's: two issues, the renewals.
    let metrics = metrics_text(esr.metrics_addr.as_deref().unwrap());
    assert_eq!(
        vault_calls(&metrics, "GeneratorRequest", "success"),
        2.0,
        "{metrics}"
    );
    assert!(
        vault_calls(&metrics, "RenewLease", "success") >= 4.0,
        "{metrics}"
    );
    let looked = bao.lookup(&tok);
    assert!(looked["ttl"].as_i64().unwrap() > 0);
    assert!(
        looked["last_renewal_time"].as_i64().unwrap() >= looked["creation_time"].as_i64().unwrap()
    );

    // A changed generator spec issues a new token once, which is then renewed in turn.
    apply_generator(
        &env,
        &ns,
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "VaultDynamicSecret",
               "metadata": {"name": "issuer"}, "spec": token_issuer_spec(bao, "2h")}),
    )
    .await;
    let tok2 = esr_e2e::wait_for("a new token after the spec change", TIMEOUT, || async {
        let d = decoded(&secret(&env, &ns, "tokens").await?);
        let t = d.get("client_token")?.clone();
        (t != tok).then_some(t)
    })
    .await
    .unwrap();
    assert_eq!(bao.lookup(&tok2)["creation_ttl"], 7200);
    let r = wait_renewed_after(bao, &tok2, 0).await;
    wait_renewed_after(bao, &tok2, r).await;
    assert_eq!(bao.token_count(), base + 3);
    let now = decoded(&secret(&env, &ns, "tokens").await.unwrap());
    assert!(now["client_token"] == tok2 && now["cluster_client_token"] == ctok);

    // The lease state is in memory: a restarted controller issues new tokens once per consumer
    // and renews those; the old tokens stay valid until their TTL.
    esr.stop();
    let _esr2 = env.start_esr(&[]).unwrap();
    let (tok3, ctok3) = esr_e2e::wait_for("new tokens after a restart", TIMEOUT, || async {
        let d = decoded(&secret(&env, &ns, "tokens").await?);
        let (t, c) = (
            d.get("client_token")?.clone(),
            d.get("cluster_client_token")?.clone(),
        );
        (t != tok2 && c != ctok).then_some((t, c))
    })
    .await
    .unwrap();
    let r = wait_renewed_after(bao, &tok3, 0).await;
    wait_renewed_after(bao, &tok3, r).await;
    wait_renewed_after(bao, &ctok3, 0).await;
    assert_eq!(bao.token_count(), base + 5);
    assert!(
        bao.lookup(&tok2)["ttl"].as_i64().unwrap() > 0,
        "old token revoked"
    );
    let now = decoded(&secret(&env, &ns, "tokens").await.unwrap());
    assert!(now["client_token"] == tok3 && now["cluster_client_token"] == ctok3);
    assert!(!esr.logs().contains(tok.as_str()), "a token was logged");
    env.cleanup().await.unwrap();
}

#[test]
fn render_with_a_vault_dynamic_secret_generator() {
    let Some(bao) = bao() else { return };
    let manifest = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: vault-token, namespace: apps}}
stringData: {{token: "{token}"}}
---
apiVersion: generators.external-secrets.io/v1alpha1
kind: VaultDynamicSecret
metadata: {{name: issuer, namespace: apps}}
spec:
  path: auth/token/create
  method: POST
  parameters: {{ttl: 10m, renewable: true, policies: [default]}}
  resultType: Auth
  provider:
    server: "{addr}"
    auth: {{tokenSecretRef: {{name: vault-token, key: token}}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: tok, namespace: apps}}
spec:
  target: {{name: tok}}
  dataFrom:
    - sourceRef:
        generatorRef: {{apiVersion: generators.external-secrets.io/v1alpha1, kind: VaultDynamicSecret, name: issuer}}
      rewrite: [{{regexp: {{source: client_token, target: VAULT_TOKEN}}}}]
"#,
        token = bao.token,
        addr = bao.addr
    );
    let (stdout, stderr) = esr_render(&manifest);
    let secret: k8s_openapi::api::core::v1::Secret = yaml_serde::from_str(&stdout).unwrap();
    let data = decoded(&secret);
    let token = data
        .get("VAULT_TOKEN")
        .expect("VAULT_TOKEN in the rendered Secret");
    assert_eq!(data.get("renewable").map(String::as_str), Some("true"));
    // The rendered token is a live token issued for this run.
    let looked =
        bao.api("POST", "auth/token/lookup", Some(json!({"token": token})))["data"].clone();
    assert_eq!(looked["creation_ttl"], 600);
    assert!(!stderr.contains(token.as_str()));
}
