//! Hot reload: an atomic rename seen by the directory watch, a Kubernetes-style ConfigMap
//! symlink swap seen by the poll, and a bad file that keeps the old rules and reports why.
//! Waits are on the rule book's change signal, bounded; nothing sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use serde_json::Value;
use weir_server::{AdminToken, ReloadSettings};

const TOKEN: &str = "test-admin-token-0123456789";

/// The `limit` `/v1/check` reports for `(k, v)` in domain `d`.
async fn limit_of(server: &TestServer) -> Value {
    let a = server
        .post("/v1/check", &check_body("d", &[("k", "v")]))
        .await;
    let v: Value = serde_json::from_str(&a.body).unwrap();
    v["descriptors"][0]["limit"].clone()
}

/// Waits (at most 10 s) until the rule book has attempted one more reload.
async fn next_reload(rx: &mut tokio::sync::watch::Receiver<u64>) {
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("a reload within 10 s")
        .unwrap();
}

fn watch_only() -> ReloadSettings {
    ReloadSettings {
        watch: true,
        debounce: Duration::from_millis(20),
        poll: Duration::from_secs(3600),
    }
}

fn poll_only() -> ReloadSettings {
    ReloadSettings {
        watch: false,
        debounce: Duration::from_millis(20),
        poll: Duration::from_millis(50),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_rename_is_seen_by_the_watch_and_keeps_counts() {
    bounded(async {
        let dir = Scratch::new("rename");
        let file = dir.write("rules.yaml", &simple_rules("d", "k", 3, "minute"));
        let (mut settings, _clock) = settings(Some(&file));
        settings.engine.reload = watch_only();
        let server = TestServer::start(settings).await;
        let mut changes = server.app.engine().rules().subscribe();
        assert_eq!(limit_of(&server).await, 3);

        // The same rule, now with a name: written aside, then renamed over the file.
        assert_eq!(
            server
                .post("/v1/check", &check_body("d", &[("k", "v")]))
                .await
                .status,
            200
        );
        dir.write(
            ".rules.yaml.tmp",
            &simple_rules("d", "k", 3, "minute")
                .replace("unit: minute", "unit: minute\n      name: same"),
        );
        std::fs::rename(dir.path(".rules.yaml.tmp"), &file).unwrap();
        next_reload(&mut changes).await;
        assert_eq!(server.app.engine().config_status().generation, 2);
        // The count survived the swap: 2 used before (one by limit_of), 1 now, 0 left.
        let a = server
            .post("/v1/check", &check_body("d", &[("k", "v")]))
            .await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["descriptors"][0]["remaining"], 0);

        // A changed limit applies at once.
        dir.write(".rules.yaml.tmp", &simple_rules("d", "k", 7, "minute"));
        std::fs::rename(dir.path(".rules.yaml.tmp"), &file).unwrap();
        next_reload(&mut changes).await;
        assert_eq!(limit_of(&server).await, 7);
        // …to the usage the key already has (the rule's records are named by its place in
        // the files, not its parameters): 4 used (one more by limit_of), 1 now, 2 left.
        let a = server
            .post("/v1/check", &check_body("d", &[("k", "v")]))
            .await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["descriptors"][0]["remaining"], 2);
        server.stop().await.unwrap();
    })
    .await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_symlink_swap_is_seen_by_the_poll() {
    use std::os::unix::fs::symlink;

    bounded(async {
        // The layout kubelet makes: rules.yaml -> ..data/rules.yaml, ..data -> ..v1
        let dir = Scratch::new("configmap");
        std::fs::create_dir(dir.path("..v1")).unwrap();
        dir.write("..v1/rules.yaml", &simple_rules("d", "k", 2, "minute"));
        symlink("..v1", dir.path("..data")).unwrap();
        symlink("..data/rules.yaml", dir.path("rules.yaml")).unwrap();
        let (mut settings, _clock) = settings(Some(&dir.0));
        settings.engine.reload = poll_only();
        let server = TestServer::start(settings).await;
        let mut changes = server.app.engine().rules().subscribe();
        assert_eq!(limit_of(&server).await, 2);

        // An update: a new version directory, then ..data swapped atomically to it.
        std::fs::create_dir(dir.path("..v2")).unwrap();
        dir.write("..v2/rules.yaml", &simple_rules("d", "k", 9, "minute"));
        symlink("..v2", dir.path("..data_tmp")).unwrap();
        std::fs::rename(dir.path("..data_tmp"), dir.path("..data")).unwrap();
        next_reload(&mut changes).await;
        assert_eq!(limit_of(&server).await, 9);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_keeps_the_old_rules_and_reports_the_error() {
    bounded(async {
        let dir = Scratch::new("bad");
        let file = dir.write("rules.yaml", &simple_rules("d", "k", 4, "minute"));
        let (mut settings, _clock) = settings(Some(&file));
        settings.engine.reload = ReloadSettings {
            watch: true,
            debounce: Duration::from_millis(20),
            poll: Duration::from_millis(100),
        };
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;
        let mut changes = server.app.engine().rules().subscribe();

        dir.write(".tmp", &simple_rules("d", "k", 4, "fortnight"));
        std::fs::rename(dir.path(".tmp"), &file).unwrap();
        next_reload(&mut changes).await;
        let status = server.app.engine().config_status();
        assert!(!status.last_ok);
        let error = status.last_error.unwrap();
        assert!(
            error.starts_with(&file.display().to_string()),
            "names the file: {error}"
        );
        assert!(error.contains("unit"), "names the place: {error}");
        assert_eq!(status.generation, 1, "old rules kept");
        assert_eq!(limit_of(&server).await, 4);

        // The admin API and the metrics report it too.
        let a = server.send("GET", "/admin/config", None, Some(TOKEN)).await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["last_ok"], false);
        assert_eq!(v["last_error"], error.as_str());
        let a = server
            .send("POST", "/admin/reload", None, Some(TOKEN))
            .await;
        assert_eq!(a.status, 422);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            (v["reloaded"].clone(), v["kept_generation"].clone()),
            (false.into(), 1.into())
        );
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains("weir_config_reloads_total{result=\"failure\"} 2"),
            "{metrics}"
        );
        assert!(
            metrics.contains("weir_config_last_reload_successful 0"),
            "{metrics}"
        );

        // Fixed: the next write is picked up.
        dir.write(".tmp", &simple_rules("d", "k", 6, "minute"));
        std::fs::rename(dir.path(".tmp"), &file).unwrap();
        loop {
            next_reload(&mut changes).await;
            if server.app.engine().config_status().last_ok {
                break;
            }
        }
        assert_eq!(limit_of(&server).await, 6);
        server.stop().await.unwrap();
    })
    .await;
}
