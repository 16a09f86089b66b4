//! `rest_client_requests_total{code,method,host}`: the requests of the Kubernetes client, counted
//! by a tower layer on it (client-go's metric, which controller-runtime registers).
//!
//! `code` is the HTTP status code of the answer, or `<error>` when no answer came (connection
//! refused, TLS failure, timeout), as client-go; `method` the HTTP method (`GET`, `PUT`, …; a
//! watch is a `GET`); `host` the API server's `host:port`. A watch is counted when its response
//! starts.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::{Layer, Service};

/// `code, method, host`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, or `<error>`.
    pub code: String,
    /// HTTP method.
    pub method: String,
    /// `host:port` of the API server.
    pub host: String,
}

/// The family of `rest_client_requests_total`.
pub type Requests = Family<RequestLabels, Counter>;

/// The layer (see the module docs).
#[derive(Clone)]
pub struct RestClientMetricsLayer {
    requests: Requests,
    host: String,
}

impl RestClientMetricsLayer {
    /// Counts into `requests`, labelled with the API server's `host` (`host:port`).
    pub fn new(requests: Requests, host: impl Into<String>) -> Self {
        RestClientMetricsLayer {
            requests,
            host: host.into(),
        }
    }
}

impl<S> Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;
    fn layer(&self, inner: S) -> RestClientMetrics<S> {
        RestClientMetrics {
            inner,
            requests: self.requests.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service.
#[derive(Clone)]
pub struct RestClientMetrics<S> {
    inner: S,
    requests: Requests,
    host: String,
}

impl<S, B, RB> Service<http::Request<B>> for RestClientMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let requests = self.requests.clone();
        let host = self.host.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            let code = match &res {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            requests
                .get_or_create(&RequestLabels { code, method, host })
                .inc();
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn counts_by_code_method_and_host() {
        let requests = Requests::default();
        let layer = RestClientMetricsLayer::new(requests.clone(), "10.0.0.1:6443");
        let svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
            if req.uri().path() == "/fail" {
                return Err(std::io::Error::other("refused"));
            }
            let status = if req.method() == http::Method::GET {
                200
            } else {
                404
            };
            Ok(http::Response::builder().status(status).body(()).unwrap())
        }));
        let call = |m: http::Method, path: &'static str| {
            let svc = svc.clone();
            async move {
                let req = http::Request::builder()
                    .method(m)
                    .uri(path)
                    .body(())
                    .unwrap();
                svc.oneshot(req).await
            }
        };
        call(http::Method::GET, "/api").await.unwrap();
        call(http::Method::GET, "/api").await.unwrap();
        call(http::Method::PUT, "/api").await.unwrap();
        assert!(call(http::Method::POST, "/fail").await.is_err());
        let get = |code: &str, method: &str| {
            requests
                .get_or_create(&RequestLabels {
                    code: code.into(),
                    method: method.into(),
                    host: "10.0.0.1:6443".into(),
                })
                .get()
        };
        assert_eq!(get("200", "GET"), 2);
        assert_eq!(get("404", "PUT"), 1);
        assert_eq!(get("<error>", "POST"), 1);
    }
}
