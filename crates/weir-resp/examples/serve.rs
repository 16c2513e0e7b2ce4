//! The RESP front end on the embedded memory store, with Weir's example rules (or a rule
//! file or directory given as the second argument), until Ctrl-C.
//!
//! ```sh
//! cargo run --release -p weir-resp --example serve -- 127.0.0.1:6380 [config/example.yaml]
//! redis-cli -p 6380 CL.THROTTLE user123 15 30 60       # 0 16 15 -1 2
//! redis-cli -p 6380 THROTTLE user:123 10 100 60        # 1 10 9 5 0
//! redis-cli -p 6380 WEIR.CHECK api remote_address 10.0.0.1
//! redis-cli -p 6380 -3 WEIR.CHECK api user_id alice HITS 2
//! redis-benchmark -p 6380 -n 100000 -c 50 -P 16 CL.THROTTLE rl:__rand_int__ 15 30 60 1
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use weir_engine::{Engine, EngineSettings};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:6380".to_string());
    let mut settings = EngineSettings::default(); // example rules, memory store
    if let Some(path) = args.next() {
        settings = settings.with_rules(path);
    }
    let engine = Engine::open(settings).await?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("weir-resp listening on {}", listener.local_addr()?);
    weir_resp::serve(listener, engine, weir_resp::Settings::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
