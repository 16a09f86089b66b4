//! Leader election with two esr processes: only the Lease holder writes; after `kill -9` of the
//! leader the standby takes the Lease over and reconciles. The testkit audit log (user agent
//! `esr/<version> (pid N)`) proves that there was never a moment with two writers: every
//! non-Lease write of the standby comes after its own successful Lease acquisition and after the
//! leader's last write.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::process::Command;
use std::time::{Duration, Instant};

use es_support::*;
use esr_e2e::Env;
use serde_json::json;

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

fn es_named(name: &str) -> serde_json::Value {
    es(
        name,
        json!({
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "SecretStore", "name": "fake"},
            "target": {"name": name},
            "data": [{"secretKey": "k", "remoteRef": {"key": "/k"}}]
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_after_kill_and_never_writes_concurrently() {
    let env = Env::start().await.unwrap();
    let Some(audit) = env.audit().cloned() else {
        println!("skipped: no audit log (not esr-testkit)");
        return;
    };
    let ns = env.namespace("le").await.unwrap();
    let args = [
        "--enable-leader-election",
        "--leader-election-id=esr-e2e",
        &format!("--leader-election-namespace={ns}"),
    ]
    .map(|s| s.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/k", "value": "v"}])),
    )
    .await;
    let leader = env.start_esr(&args).unwrap();
    apply(&env, &ns, es_named("one")).await;
    wait_condition(&env, "ExternalSecret", &ns, "one", "True", "SecretSynced").await;
    let standby = env.start_esr(&args).unwrap();
    let (pa, pb) = (leader.pid(), standby.pid());
    // While both run, the leader keeps reconciling new objects.
    tokio::time::sleep(Duration::from_secs(3)).await;
    apply(&env, &ns, es_named("two")).await;
    wait_condition(&env, "ExternalSecret", &ns, "two", "True", "SecretSynced").await;

    // kill -9 the leader; the standby must take over (Lease 15 s) and reconcile.
    let killed = Command::new("kill")
        .args(["-KILL", &pa.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let t0 = Instant::now();
    apply(&env, &ns, es_named("three")).await;
    let three = wait_for_secs(&env, &ns, "three", 60).await;
    println!(
        "takeover: ExternalSecret reconciled {:?} after kill -9 of the leader",
        t0.elapsed()
    );
    assert!(
        three,
        "the standby did not take over; standby log:\n{}",
        standby.logs()
    );

    let entries = audit.entries();
    let idx = |pid: u32, lease: Option<bool>| -> Vec<usize> {
        let tag = format!("(pid {pid})");
        entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.user_agent.ends_with(&tag) && is_write(&e.verb) && e.code < 300)
            .filter(|(_, e)| match lease {
                Some(true) => e.resource == "leases",
                Some(false) => e.resource != "leases",
                None => true,
            })
            .map(|(i, _)| i)
            .collect()
    };
    let a_writes = idx(pa, Some(false));
    let b_writes = idx(pb, Some(false));
    let b_lease = idx(pb, Some(true));
    assert!(!a_writes.is_empty(), "the leader wrote nothing");
    assert!(
        !b_writes.is_empty(),
        "the standby never wrote after taking over"
    );
    let b_acquired = *b_lease.first().expect("standby never wrote the Lease");
    let a_last = *a_writes.last().unwrap();
    let b_first = *b_writes.first().unwrap();
    assert!(
        b_first > b_acquired,
        "standby wrote (audit #{b_first}) before acquiring the Lease (#{b_acquired})"
    );
    assert!(
        b_first > a_last,
        "two writers: standby wrote at #{b_first}, leader last wrote at #{a_last}"
    );
    assert!(
        b_acquired > a_last,
        "standby acquired the Lease (#{b_acquired}) before the leader's last write (#{a_last})"
    );
    println!(
        "audit: leader {} writes (last #{a_last}), standby acquired at #{b_acquired}, first write #{b_first}, {} writes",
        a_writes.len(),
        b_writes.len()
    );
    drop(standby);
}

async fn wait_for_secs(env: &Env, ns: &str, name: &str, secs: u64) -> bool {
    esr_e2e::wait_for(
        "synced after takeover",
        Duration::from_secs(secs),
        || async {
            let o = get(env, "ExternalSecret", ns, name).await?;
            (ready(&o).1 == "SecretSynced").then_some(())
        },
    )
    .await
    .is_ok()
}

/// A graceful stop (SIGTERM, as in a rolling update) hands the Lease back after the leader's last
/// write, so the standby takes over at its next retry instead of after the lease duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_releases_the_lease_after_the_last_write() {
    use k8s_openapi::api::coordination::v1::Lease;
    let env = Env::start().await.unwrap();
    let ns = env.namespace("lerel").await.unwrap();
    let args = [
        "--enable-leader-election",
        "--leader-election-id=esr-e2e-release",
        &format!("--leader-election-namespace={ns}"),
    ]
    .map(|s| s.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/k", "value": "v"}])),
    )
    .await;
    let mut leader = env.start_esr(&args).unwrap();
    apply(&env, &ns, es_named("one")).await;
    wait_condition(&env, "ExternalSecret", &ns, "one", "True", "SecretSynced").await;
    let leases: kube::Api<Lease> = kube::Api::namespaced(env.client(), &ns);
    let held = leases.get("esr-e2e-release").await.unwrap();
    let old_holder = held.spec.as_ref().unwrap().holder_identity.clone().unwrap();
    let standby = env.start_esr(&args).unwrap();
    if let Some(a) = env.audit() {
        a.clear();
    }

    leader.stop();
    leader.wait_exit(Duration::from_secs(30)).await.unwrap();
    // Released: no holder any more, or already the standby; never the stopped leader.
    let after = leases.get("esr-e2e-release").await.unwrap();
    let holder = after.spec.as_ref().unwrap().holder_identity.clone();
    assert_ne!(
        holder.as_deref(),
        Some(old_holder.as_str()),
        "the stopped leader still holds the Lease; leader log:\n{}",
        leader.logs()
    );
    assert!(
        leader.logs().contains("released leadership"),
        "{}",
        leader.logs()
    );
    // The standby takes over and reconciles.
    apply(&env, &ns, es_named("two")).await;
    assert!(
        wait_for_secs(&env, &ns, "two", 60).await,
        "standby log:\n{}",
        standby.logs()
    );
    // The leader's Lease release was its last write (no write after handing over).
    if let Some(audit) = env.audit() {
        let tag = format!("(pid {})", leader.pid());
        let writes: Vec<_> = audit
            .entries()
            .into_iter()
            .filter(|e| e.user_agent.ends_with(&tag) && is_write(&e.verb) && e.code < 300)
            .collect();
        let last = writes.last().expect("the leader released the Lease");
        assert_eq!(last.resource, "leases", "{writes:?}");
    }
}
