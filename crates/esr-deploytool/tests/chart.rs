//! The Helm chart rendered with esr-template (+ shims for include/tpl/required/.Values/.Release/
//! .Chart): its default output equals the committed deploy/manifests, and the values behave.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use esr_deploytool::{Release, chart_crd_templates, render_chart, render_manifests, repo_root};
use serde_json::{Value, json};

fn chart() -> std::path::PathBuf {
    repo_root().join("deploy/charts/esr")
}

/// All rendered documents as JSON.
fn objects(overrides: Value) -> Vec<Value> {
    render_chart(&chart(), &overrides, &Release::default())
        .unwrap()
        .into_iter()
        .flat_map(|r| r.documents)
        .map(|d| serde_yaml_ng::from_str::<Value>(&d).unwrap())
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

fn container(objs: &[Value]) -> Value {
    find(objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0].clone()
}

fn args(objs: &[Value]) -> Vec<String> {
    container(objs)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn committed_manifests_are_up_to_date() {
    let want = render_manifests(&chart()).unwrap();
    for (name, content) in &want {
        let path = repo_root().join("deploy/manifests").join(name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == *content,
            "{} is stale: run `make manifests`",
            path.display()
        );
    }
    // `kubectl apply -f deploy/manifests/` reads every .yaml/.yml/.json file: each must hold
    // Kubernetes objects only (the kustomization is named `Kustomization`).
    for entry in std::fs::read_dir(repo_root().join("deploy/manifests")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !(name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")) {
            assert_eq!(name, esr_deploytool::MANIFESTS_KUSTOMIZATION);
            continue;
        }
        assert!(
            want.contains_key(&name),
            "{} is not generated",
            path.display()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            assert!(
                !v["apiVersion"]
                    .as_str()
                    .unwrap()
                    .starts_with("kustomize.config.k8s.io"),
                "{} holds a kustomize file",
                path.display()
            );
        }
    }
    let crds = chart_crd_templates(&repo_root().join("crds")).unwrap();
    assert_eq!(crds.len(), 10);
    for (name, content) in &crds {
        let path = chart().join("templates/crds").join(name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == *content,
            "{} is stale: run `make manifests`",
            path.display()
        );
    }
}

#[test]
fn defaults_are_secure_and_never_named_external_secrets() {
    let objs = objects(json!({}));
    assert_eq!(find(&objs, "CustomResourceDefinition").len(), 10);
    for o in &objs {
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(!name.starts_with("external-secrets"), "{name}");
    }
    let sa = find(&objs, "ServiceAccount");
    assert_eq!(sa.len(), 1);
    assert_eq!(sa[0]["metadata"]["name"], "esr");
    let dep = find(&objs, "Deployment")[0];
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "esr");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let sc = &container(&objs)["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let a = args(&objs);
    assert_eq!(a[0], "controller");
    assert!(a.contains(&"--enable-leader-election".to_string()));
    assert!(a.contains(&"--leader-election-id=esr-controller".to_string()));
    assert!(a.contains(&"--leader-election-namespace=esr-system".to_string()));
    let svc = find(&objs, "Service");
    assert_eq!(svc[0]["spec"]["ports"][0]["targetPort"], "metrics");
    assert!(find(&objs, "ServiceMonitor").is_empty());
    assert!(find(&objs, "PodDisruptionBudget").is_empty());
    let binding = find(&objs, "ClusterRoleBinding")[0];
    assert_eq!(binding["subjects"][0]["name"], "esr");
    assert_eq!(binding["subjects"][0]["namespace"], "esr-system");
}

#[test]
fn values_change_the_output() {
    let objs = objects(json!({
        "installCRDs": false,
        "replicaCount": 3,
        "concurrent": 4,
        "leaderElect": false,
        "scopedNamespace": "team-a",
        "scopedRBAC": true,
        "controllerClass": "blue",
        "extraArgs": {"client-qps": 20},
        "serviceAccount": {"name": "esr-custom", "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}},
        "serviceMonitor": {"enabled": true, "additionalLabels": {"release": "prom"}},
        "podDisruptionBudget": {"enabled": true},
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "imagePullSecrets": [{"name": "regcred"}],
        "image": {"tag": "v9"},
    }));
    assert!(find(&objs, "CustomResourceDefinition").is_empty());
    let dep = find(&objs, "Deployment")[0];
    assert_eq!(dep["spec"]["replicas"], 3);
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "esr-custom");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["tolerations"][0]["key"], "k");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");
    assert_eq!(container(&objs)["image"], "ghcr.io/esr-project/esr:v9");
    let a = args(&objs);
    for want in [
        "--concurrent=4",
        "--namespace=team-a",
        "--enable-cluster-store-reconciler=false",
        "--controller-class=blue",
        "--client-qps=20",
    ] {
        assert!(a.contains(&want.to_string()), "{want} not in {a:?}");
    }
    assert!(!a.iter().any(|x| x.starts_with("--enable-leader-election")));
    let sa = find(&objs, "ServiceAccount")[0];
    assert_eq!(sa["metadata"]["name"], "esr-custom");
    assert_eq!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::1:role/x"
    );
    // scoped RBAC: a Role in the namespace, no ClusterRole, no leader election Role
    assert!(find(&objs, "ClusterRole").is_empty());
    let roles = find(&objs, "Role");
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["metadata"]["namespace"], "team-a");
    let sm = find(&objs, "ServiceMonitor")[0];
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        find(&objs, "PodDisruptionBudget")[0]["spec"]["minAvailable"],
        1
    );
}

#[test]
fn required_service_account_name_without_create() {
    let err = render_chart(
        &chart(),
        &json!({"serviceAccount": {"create": false}}),
        &Release::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("serviceAccount.name is required"), "{err}");
    let objs = objects(json!({"serviceAccount": {"create": false, "name": "existing"}}));
    assert!(find(&objs, "ServiceAccount").is_empty());
    assert_eq!(
        find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["serviceAccountName"],
        "existing"
    );
}

#[test]
fn release_name_and_namespace_are_used() {
    let release = Release {
        name: "prod".into(),
        namespace: "secrets".into(),
    };
    let objs: Vec<Value> =
        render_chart(&chart(), &json!({"fullnameOverride": "esr-prod"}), &release)
            .unwrap()
            .into_iter()
            .flat_map(|r| r.documents)
            .map(|d| serde_yaml_ng::from_str(&d).unwrap())
            .collect();
    let dep = find(&objs, "Deployment")[0];
    assert_eq!(dep["metadata"]["name"], "esr-prod");
    assert_eq!(dep["metadata"]["namespace"], "secrets");
    assert_eq!(
        dep["metadata"]["labels"]["app.kubernetes.io/instance"],
        "prod"
    );
    assert!(args(&objs).contains(&"--leader-election-namespace=secrets".to_string()));
}

#[test]
fn tpl_shim_renders_with_helpers() {
    // `tpl` evaluates a string as a template against the root, with the chart's defines.
    let dir = tempfile_dir();
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "name: t\nversion: 1.0.0\nappVersion: \"2\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("values.yaml"),
        "greeting: \"{{ include \\\"t.x\\\" . }}-{{ .Release.Name }}\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/_h.tpl"),
        "{{- define \"t.x\" -}}x{{ .Chart.AppVersion }}{{- end -}}",
    )
    .unwrap();
    std::fs::write(dir.join("templates/cm.yaml"), "kind: ConfigMap\ndata:\n  g: {{ tpl .Values.greeting . | quote }}\n  m: {{ .Values.missing | default \"d\" }}\n").unwrap();
    let r = render_chart(&dir, &json!({}), &Release::default()).unwrap();
    let cm: Value = serde_yaml_ng::from_str(&r[0].documents[0]).unwrap();
    assert_eq!(cm["data"]["g"], "x2-esr");
    assert_eq!(cm["data"]["m"], "d");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("esr-deploytool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
