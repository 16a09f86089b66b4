//! esr-testkit: a local Kubernetes API server for esr's tests and demo. Never production.
//!
//! It serves plain HTTP on 127.0.0.1, by default without authentication (bearer tokens are
//! accepted and ignored; [`Options::rbac`] enforces RBAC for ServiceAccount tokens, see [`authz`])
//! and behaves like a real kube-apiserver for what an operator and kubectl use:
//! discovery, built-in kinds, CRDs, list/watch, create/update/patch (merge, JSON, strategic,
//! server-side apply), delete with finalizers and garbage collection, namespaces, the status
//! subresource, ServiceAccount tokens and TokenReview. See README.md for the full list.
//!
//! The default feature `kubectl` adds what only kubectl needs: OpenAPI v3 documents
//! ([`openapi`]), `meta.k8s.io/v1` Table responses for `kubectl get` ([`table`]) and the protobuf
//! request bodies of kubectl's typed generators ([`proto`]). Without it, `/openapi/v3` is 404,
//! a Table request gets the plain JSON object or list, and a protobuf body is refused with 415 like
//! CBOR; kube-rs clients use none of these.
//!
//! ```no_run
//! # async fn demo() -> Result<(), esr_testkit::TestkitError> {
//! let server = esr_testkit::TestServer::start().await?;
//! let client = server.client();
//! server.faults().fail_next(Some("get"), Some("secrets"), 1, 500);
//! # let _ = client; Ok(()) }
//! ```

#![allow(clippy::result_large_err, clippy::type_complexity)]

pub mod authz;
pub mod controllers;
pub mod crd_validation;
pub mod error;
pub mod faults;
pub mod http;
pub mod managed;
pub mod object_validation;
#[cfg(feature = "kubectl")]
pub mod openapi;
#[cfg(feature = "kubectl")]
pub mod proto;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod store;
#[cfg(feature = "kubectl")]
pub mod table;
pub mod tokens;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use error::ApiError;
pub use faults::{Audit, AuditEntry, FailRule, Faults};
pub use store::{Store, StoreConfig, WriteCtx};

/// Errors of the test server.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// Binding or serving failed.
    #[error("io error: {0}")]
    Io(#[from] std::io::Error),
    /// The kube client could not be built.
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    /// Token key generation failed.
    #[error("token issuer: {0}")]
    Token(#[from] tokens::TokenError),
    /// A manifest could not be read.
    #[error("manifest {path}: {message}")]
    Manifest {
        /// File.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The API rejected an object.
    #[error("api: {0}")]
    Api(#[from] ApiError),
}

/// Server options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Port on 127.0.0.1 (0 = random).
    pub port: u16,
    /// Delay before the garbage collector handles a deleted owner.
    pub gc_delay: Duration,
    /// Interval of watch BOOKMARK events.
    pub bookmark_interval: Duration,
    /// Store configuration (history window for watches).
    pub store: StoreConfig,
    /// Enforce RBAC for ServiceAccount tokens (see [`authz`]); off by default. Requests without
    /// a token or with the kubeconfig's token stay cluster-admin.
    pub rbac: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            port: 0,
            gc_delay: Duration::ZERO,
            bookmark_interval: Duration::from_secs(5),
            store: StoreConfig::default(),
            rbac: false,
        }
    }
}

/// A running server.
pub struct TestServer {
    app: Arc<http::App>,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    stop: CancellationToken,
    client: kube::Client,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// Start on a random port with default options.
    pub async fn start() -> Result<Self, TestkitError> {
        Self::start_with(Options::default()).await
    }

    /// Start with options.
    pub async fn start_with(opts: Options) -> Result<Self, TestkitError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port)).await?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}");
        let store = Store::new(opts.store.clone());
        let app = Arc::new(http::App {
            store: Arc::clone(&store),
            faults: Faults::new(Arc::clone(&store)),
            audit: Audit::default(),
            tokens: tokens::TokenIssuer::new(&url)?,
            addr: addr.to_string(),
            bookmark_interval: opts.bookmark_interval,
            active_watches: Arc::default(),
            rbac: opts.rbac,
        });
        let stop = CancellationToken::new();
        controllers::spawn(Arc::clone(&store), stop.clone(), opts.gc_delay);
        let router = http::router(Arc::clone(&app));
        let stop2 = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop2.cancelled().await })
                .await;
        });
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&url, "default"))?;
        let cfg = kube::Config::new(
            url.parse()
                .map_err(|e: ::http::uri::InvalidUri| std::io::Error::other(e.to_string()))?,
        );
        let client = kube::Client::try_from(cfg)?;
        Ok(Self {
            app,
            addr,
            _dir: dir,
            kubeconfig,
            stop,
            client,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Path of a kubeconfig for this server (in a temp dir removed when the server is dropped).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Write a kubeconfig for this server.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, kubeconfig_yaml(&self.url(), "default"))
    }

    /// A kube client for this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// True when RBAC is enforced ([`Options::rbac`]).
    pub fn rbac_enabled(&self) -> bool {
        self.app.rbac
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.app.faults
    }

    /// The audit log of API calls.
    pub fn audit(&self) -> &Audit {
        &self.app.audit
    }

    /// The object store (direct access for tests).
    pub fn store(&self) -> &Arc<Store> {
        &self.app.store
    }

    /// Number of watch streams currently open (to check that clients do not leak watches).
    pub fn active_watches(&self) -> usize {
        self.app
            .active_watches
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// OIDC issuer URL of ServiceAccount tokens (= `url()`).
    pub fn issuer(&self) -> &str {
        &self.app.tokens.issuer
    }

    /// Create or replace every CustomResourceDefinition found in `*.yaml`/`*.yml`/`*.json` files of a
    /// directory (multi-document YAML is fine). Returns the number of CRDs applied.
    pub fn apply_crds_from_dir(&self, dir: &Path) -> Result<usize, TestkitError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            })
            .collect();
        files.sort();
        let mut n = 0;
        for f in files {
            for doc in read_manifests(&f)? {
                if doc["kind"] == "CustomResourceDefinition" {
                    self.apply_object(doc)?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    /// Create or replace one object given as JSON (any served kind).
    pub fn apply_object(&self, doc: Value) -> Result<Value, TestkitError> {
        let store = &self.app.store;
        let av = doc["apiVersion"].as_str().unwrap_or_default();
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        let kind = doc["kind"].as_str().unwrap_or_default();
        let rt = store
            .registry()
            .by_kind(g, v, kind)
            .ok_or_else(|| TestkitError::Manifest {
                path: PathBuf::new(),
                message: format!("kind {kind} in {av} is not served"),
            })?;
        let ns = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ctx = WriteCtx {
            manager: "esr-testkit".into(),
            ..Default::default()
        };
        match store.create(&rt, &ns, doc.clone(), &ctx) {
            Ok(r) => Ok(r.object),
            Err(e) if e.code == 409 => {
                let cur = store.get(&rt, &ns, &name)?;
                let mut d = doc;
                d["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
                Ok(store.update(&rt, &ns, &name, d, "", &ctx)?.object)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Stop serving (also done on drop).
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Read all documents of a YAML or JSON manifest file.
pub fn read_manifests(path: &Path) -> Result<Vec<Value>, TestkitError> {
    let text = std::fs::read_to_string(path)?;
    let mut out = vec![];
    for de in yaml_serde::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(de).map_err(|e| TestkitError::Manifest {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if v.is_null() {
            continue;
        }
        if v["kind"] == "List" {
            if let Some(items) = v["items"].as_array() {
                out.extend(items.iter().cloned());
            }
        } else {
            out.push(v);
        }
    }
    Ok(out)
}

/// A kubeconfig for a server URL, with the admin token ([`authz::ADMIN_TOKEN`]).
pub fn kubeconfig_yaml(url: &str, namespace: &str) -> String {
    kubeconfig_yaml_for_token(url, namespace, authz::ADMIN_TOKEN)
}

/// A kubeconfig for a server URL that authenticates with a bearer token (e.g. a ServiceAccount
/// token from TokenRequest, to act as that ServiceAccount when RBAC is on).
pub fn kubeconfig_yaml_for_token(url: &str, namespace: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: esr-testkit\n  cluster:\n    server: {url}\nusers:\n- name: esr-testkit\n  user:\n    token: {token}\ncontexts:\n- name: esr-testkit\n  context:\n    cluster: esr-testkit\n    user: esr-testkit\n    namespace: {namespace}\ncurrent-context: esr-testkit\npreferences: {{}}\n"
    )
}
