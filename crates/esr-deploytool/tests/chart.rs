//! The Helm chart rendered by real Helm (installed into esr-testkit, see esr_deploytool::helm):
//! its default output equals the committed deploy/manifests, `helm lint` passes, and the values
//! behave, values.schema.json included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use esr_deploytool::helm::Helm;
use esr_deploytool::{
    Release, chart_crd_templates, render_chart, render_chart_with, render_manifests, repo_root,
};
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
        .map(|d| yaml_serde::from_str::<Value>(&d).unwrap())
        .collect()
}

/// All rendered documents without the CRDs (installing them is most of an install's time).
fn objects_no_crds(mut overrides: Value) -> Vec<Value> {
    overrides["installCRDs"] = json!(false);
    objects(overrides)
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
        for doc in yaml_serde::Deserializer::from_str(&text) {
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
    assert_eq!(crds.len(), 13);
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
    assert_eq!(find(&objs, "CustomResourceDefinition").len(), 13);
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
    // scoped RBAC: a Role in the namespace, no controller ClusterRole, no leader election Role
    assert!(
        find(&objs, "ClusterRole")
            .iter()
            .all(|r| r["metadata"]["name"] != "esr-controller")
    );
    assert!(find(&objs, "ClusterRoleBinding").is_empty());
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
    let objs = objects_no_crds(json!({"serviceAccount": {"create": false, "name": "existing"}}));
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
    let objs: Vec<Value> = render_chart(
        &chart(),
        &json!({"fullnameOverride": "esr-prod", "installCRDs": false}),
        &release,
    )
    .unwrap()
    .into_iter()
    .flat_map(|r| r.documents)
    .map(|d| yaml_serde::from_str(&d).unwrap())
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
fn helm_lint_passes() {
    let report = Helm::ensure().unwrap().lint(&chart()).unwrap();
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    // Lint reads values.schema.json: a chart whose values break its schema fails.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&chart(), dir.path());
    let values = dir.path().join("values.yaml");
    let text = std::fs::read_to_string(&values).unwrap();
    std::fs::write(
        &values,
        text.replace("replicaCount: 1", "replicaCount: one"),
    )
    .unwrap();
    let report = Helm::ensure().unwrap().lint(dir.path());
    let failed = match report {
        Err(_) => true,
        Ok(r) => !r.problems().is_empty(),
    };
    assert!(failed, "a schema violation must fail helm lint");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

#[test]
fn unknown_or_misspelled_values_fail() {
    for bad in [
        json!({"replicaCnt": 2}),
        json!({"crds": {"createPushSecrets": false}}),
        json!({"rbac": {"aggregateToViewer": true}}),
        json!({"livenessProbe": {"enable": false}}),
        json!({"global": {"compatibility": {"openshift": {"adaptSecurityContext": "sometimes"}}}}),
        json!({"replicaCount": "2"}),
    ] {
        let err = render_chart(&chart(), &bad, &Release::default()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("schema"), "{bad}: {msg}");
    }
}

#[test]
fn crds_are_kept_on_uninstall_by_default_and_can_be_left_out() {
    let objs = objects(json!({}));
    let crds = find(&objs, "CustomResourceDefinition");
    assert_eq!(crds.len(), 13);
    for c in &crds {
        assert_eq!(
            c["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{}",
            c["metadata"]["name"]
        );
    }
    let objs = objects(json!({
        "crds": {
            "annotations": {"example.com/owner": "platform"},
            "createClusterExternalSecret": false,
            "createClusterSecretStore": false,
            "createSecretStore": false,
            "createClusterGenerator": false,
            "createClusterPushSecret": false,
            "createPushSecret": false,
        },
        "processClusterExternalSecret": false,
        "processClusterStore": false,
        "processClusterPushSecret": false,
        "processPushSecret": false,
    }));
    let mut names: Vec<&str> = find(&objs, "CustomResourceDefinition")
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ecrauthorizationtokens.generators.external-secrets.io",
            "externalsecrets.external-secrets.io",
            "fakes.generators.external-secrets.io",
            "passwords.generators.external-secrets.io",
            "stssessiontokens.generators.external-secrets.io",
            "vaultdynamicsecrets.generators.external-secrets.io",
            "webhooks.generators.external-secrets.io",
        ]
    );
    for c in find(&objs, "CustomResourceDefinition") {
        // Helm merges maps: an added annotation keeps the default one.
        assert_eq!(
            c["metadata"]["annotations"],
            json!({"example.com/owner": "platform", "helm.sh/resource-policy": "keep"})
        );
    }
    let a = args(&objs);
    for want in [
        "--enable-cluster-store-reconciler=false",
        "--enable-cluster-external-secret-reconciler=false",
        "--enable-cluster-push-secret-reconciler=false",
        "--enable-push-secret-reconciler=false",
    ] {
        assert!(a.contains(&want.to_string()), "{want} not in {a:?}");
    }
}

#[test]
fn cluster_push_secrets_need_push_secrets() {
    let err = render_chart(
        &chart(),
        &json!({"processPushSecret": false}),
        &Release::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("processClusterPushSecret needs processPushSecret"),
        "{err}"
    );
}

#[test]
fn aggregated_roles_follow_the_rbac_values() {
    let objs = objects_no_crds(json!({}));
    let role = |objs: &[Value], name: &str| {
        find(objs, "ClusterRole")
            .into_iter()
            .find(|r| r["metadata"]["name"] == name)
            .cloned()
    };
    let view = role(&objs, "esr-view").unwrap();
    let labels = &view["metadata"]["labels"];
    for l in ["view", "edit", "admin"] {
        assert_eq!(
            labels[format!("rbac.authorization.k8s.io/aggregate-to-{l}")],
            "true"
        );
    }
    let edit = role(&objs, "esr-edit").unwrap();
    assert!(edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"].is_null());
    assert_eq!(
        edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );

    let objs = objects_no_crds(
        json!({"rbac": {"aggregateToView": true, "aggregateToEdit": false, "aggregateToAdmin": false}}),
    );
    let view = role(&objs, "esr-view").unwrap();
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert!(view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"].is_null());
    assert!(role(&objs, "esr-edit").is_none());

    let objs = objects_no_crds(
        json!({"rbac": {"aggregateToView": false, "aggregateToEdit": false, "aggregateToAdmin": false}}),
    );
    assert!(role(&objs, "esr-view").is_none());
    assert!(role(&objs, "esr-controller").is_some());
}

#[test]
fn pod_extras_labels_probes_and_strategy() {
    let objs = objects_no_crds(json!({
        "commonLabels": {"team": "platform"},
        "revisionHistoryLimit": 3,
        "strategy": {"type": "Recreate"},
        "extraVolumes": [{"name": "ca", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/corp-ca", "readOnly": true}],
        "extraContainers": [{"name": "sidecar", "image": "example.com/sidecar:1"}],
        "extraInitContainers": [{"name": "init", "image": "example.com/init:1"}],
        "extraObjects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "corp-ca", "namespace": "{{ .Release.Namespace }}"}, "data": {"ca.crt": "x"}},
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n  namespace: {{ .Release.Namespace }}\n",
        ],
        "livenessProbe": {"enabled": false},
        "readinessProbe": {"spec": {"httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 7}},
    }));
    let dep = find(&objs, "Deployment")[0];
    assert_eq!(dep["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        dep["spec"]["template"]["metadata"]["labels"]["team"],
        "platform"
    );
    assert_eq!(dep["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(dep["spec"]["strategy"]["type"], "Recreate");
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "corp-ca");
    assert_eq!(pod["initContainers"][0]["name"], "init");
    let names: Vec<&str> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["esr", "sidecar"]);
    let c = container(&objs);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/etc/corp-ca");
    assert!(c["livenessProbe"].is_null());
    assert_eq!(c["readinessProbe"]["periodSeconds"], 7);
    let cms: Vec<&str> = find(&objs, "ConfigMap")
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        cms.contains(&"corp-ca") && cms.contains(&"esr-extra"),
        "{cms:?}"
    );
    for o in &objs {
        if o["kind"] != "CustomResourceDefinition" && o["kind"] != "ConfigMap" {
            assert_eq!(o["metadata"]["labels"]["team"], "platform", "{}", o["kind"]);
        }
    }
    // Defaults: both probes on the health port.
    let c = container(&objects_no_crds(json!({})));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "health");
}

fn security_contexts(objs: &[Value]) -> (Value, Value) {
    let dep = find(objs, "Deployment")[0];
    (
        dep["spec"]["template"]["spec"]["securityContext"].clone(),
        container(objs)["securityContext"].clone(),
    )
}

#[test]
fn openshift_assigns_the_uid() {
    // Plain Kubernetes: the fixed non-root UID and GID.
    let (pod, ctr) = security_contexts(&objects_no_crds(json!({})));
    assert_eq!(pod["runAsUser"], 65532);
    assert_eq!(pod["fsGroup"], 65532);
    assert_eq!(ctr["runAsUser"], 65532);
    assert!(pod.get("enabled").is_none() && ctr.get("enabled").is_none());

    // OpenShift (the cluster serves security.openshift.io/v1): no UID, GID or fsGroup.
    let scc_crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "securitycontextconstraints.security.openshift.io"},
        "spec": {"group": "security.openshift.io", "scope": "Cluster",
            "names": {"kind": "SecurityContextConstraints", "plural": "securitycontextconstraints", "singular": "securitycontextconstraints", "listKind": "SecurityContextConstraintsList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let on_openshift = |mut values: Value| -> Vec<Value> {
        values["installCRDs"] = json!(false);
        render_chart_with(
            &chart(),
            &values,
            &Release::default(),
            std::slice::from_ref(&scc_crd),
        )
        .unwrap()
        .into_iter()
        .flat_map(|r| r.documents)
        .map(|d| yaml_serde::from_str::<Value>(&d).unwrap())
        .collect()
    };
    let (pod, ctr) = security_contexts(&on_openshift(json!({})));
    for k in ["runAsUser", "runAsGroup", "fsGroup"] {
        assert!(pod.get(k).is_none(), "pod {k}: {pod}");
        assert!(ctr.get(k).is_none(), "container {k}: {ctr}");
    }
    assert_eq!(pod["runAsNonRoot"], true);
    assert_eq!(ctr["readOnlyRootFilesystem"], true);
    // disabled: kept even on OpenShift; force: dropped anywhere.
    let disabled =
        json!({"global": {"compatibility": {"openshift": {"adaptSecurityContext": "disabled"}}}});
    let (pod, _) = security_contexts(&on_openshift(disabled));
    assert_eq!(pod["runAsUser"], 65532);
    let force =
        json!({"global": {"compatibility": {"openshift": {"adaptSecurityContext": "force"}}}});
    let (pod, ctr) = security_contexts(&objects_no_crds(force));
    assert!(pod.get("runAsUser").is_none() && ctr.get("runAsUser").is_none());
    // enabled: false leaves the securityContext out.
    let (pod, ctr) = security_contexts(&objects_no_crds(
        json!({"podSecurityContext": {"enabled": false}, "securityContext": {"enabled": false}}),
    ));
    assert!(pod.is_null() && ctr.is_null());
}

#[test]
fn monitoring_objects_follow_the_values() {
    let off = objects_no_crds(json!({"serviceMonitor": {"enabled": true}}));
    assert!(find(&off, "PrometheusRule").is_empty());
    assert!(find(&off, "ConfigMap").is_empty());
    let ep = &find(&off, "ServiceMonitor")[0]["spec"]["endpoints"][0];
    assert_eq!(ep["honorLabels"], false);
    assert!(ep.get("relabelings").is_none() && ep.get("metricRelabelings").is_none());

    let relabel =
        json!([{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]);
    let drop = json!([{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}]);
    let objs = objects_no_crds(json!({
        "serviceMonitor": {"enabled": true, "honorLabels": true, "relabelings": relabel,
                           "metricRelabelings": drop},
        "grafanaDashboard": {"enabled": true, "annotations": {"grafana_folder": "Secrets"},
                             "extraLabels": {"team": "platform"}},
        "prometheusRule": {"enabled": true, "ruleLabels": {"team": "platform"},
                           "notReadyFor": "30m", "workqueueDepth": 7},
    }));
    let ep = &find(&objs, "ServiceMonitor")[0]["spec"]["endpoints"][0];
    assert_eq!(ep["honorLabels"], true);
    assert_eq!(ep["relabelings"], relabel);
    assert_eq!(ep["metricRelabelings"], drop);

    let cm = find(&objs, "ConfigMap")[0];
    assert_eq!(cm["metadata"]["name"], "esr-dashboard");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cm["metadata"]["labels"]["team"], "platform");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "Secrets");
    let dash: Value = serde_json::from_str(cm["data"]["esr.json"].as_str().unwrap()).unwrap();
    assert_eq!(dash["uid"], "esr-overview");
    // Grafana's legend templates pass through Helm untouched.
    assert!(
        cm["data"]["esr.json"]
            .as_str()
            .unwrap()
            .contains("{{namespace}}")
    );

    let rule = find(&objs, "PrometheusRule")[0];
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let names: Vec<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ESRExternalSecretSyncErrors",
            "ESRExternalSecretNotReady",
            "ESRSecretStoreNotReady",
            "ESRClusterSecretStoreNotReady",
            "ESRReconcileLatencyHigh",
            "ESRWorkqueueDepthGrowing"
        ]
    );
    for r in rules {
        assert_eq!(r["labels"]["team"], "platform", "{r}");
        // Prometheus' own templates survive Helm's.
        assert!(!r["annotations"]["summary"].as_str().unwrap().is_empty());
    }
    assert_eq!(rules[1]["for"], "30m");
    assert!(
        rules[5]["expr"]
            .as_str()
            .unwrap()
            .contains("workqueue_depth) > 7")
    );
    assert!(
        rules[0]["annotations"]["summary"]
            .as_str()
            .unwrap()
            .contains("{{ $labels.namespace }}/{{ $labels.name }}")
    );
    // A misspelled threshold is refused by the schema.
    assert!(
        render_chart(
            &chart(),
            &json!({"installCRDs": false, "prometheusRule": {"enabled": true, "notReadyFor": "ten minutes"}}),
            &Release::default()
        )
        .is_err()
    );
}
