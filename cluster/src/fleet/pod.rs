//! A pod's life, from pending to gone.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit_testkit::cgroup::Cgroup;
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use super::cpu::CpuMeter;
use super::{Departure, FleetConfig, Phase, ScaleIn, Shared};
use crate::replica::OnSigterm;

/// A pod's whole life: pending, started, behind the proxy, told to leave, gone.
pub(super) async fn run(
    shared: Arc<Shared>,
    id: u64,
    name: String,
    mut told: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let leave = |shared: &Shared| {
        shared.state().pods.remove(&id);
        shared.republish_targets();
    };
    // Pending: told to leave before the process starts costs nothing.
    tokio::select! {
        () = tokio::time::sleep(config.start_delay) => {}
        () = told_to_leave(&mut told) => return leave(&shared),
    }
    let started = match start(config, &name, id) {
        Ok(started) => started,
        Err(error) => {
            eprintln!("fleet: {name} did not start: {error}");
            return leave(&shared);
        }
    };
    let (mut child, meter) = started;
    let pid = child.id();
    let stdout = child.stdout.take();
    let addr = match read_address(stdout).await {
        Some(addr) => addr,
        None => {
            eprintln!("fleet: {name} never said where it listens");
            let _ = child.start_kill();
            let _ = child.wait().await;
            return leave(&shared);
        }
    };
    {
        let mut state = shared.state();
        if let Some(pod) = state.pods.get_mut(&id) {
            pod.addr = Some(addr);
            pod.usage = Some(meter);
            if pod.phase == Phase::Pending {
                pod.phase = Phase::Starting;
            }
        }
    }
    shared.republish_targets();
    let added = shared.proxy.add_server(&name, addr).await;
    let behind_proxy = added.is_ok();
    match &added {
        Ok(_) => {
            let mut state = shared.state();
            if let Some(pod) = state.pods.get_mut(&id)
                && pod.phase == Phase::Starting
            {
                pod.phase = Phase::Ready;
                pod.ready_at = Some(Instant::now());
            }
        }
        Err(error) => eprintln!("fleet: the proxy did not add {name}: {error}"),
    }
    // Serving until told to leave, or until the process exits on its own.
    tokio::select! {
        () = told_to_leave(&mut told) => {}
        exited = child.wait() => {
            eprintln!("fleet: {name} exited on its own: {exited:?}");
            shared.state().events.crashed += 1;
            let _ = shared.proxy.remove(&name).await;
            return leave(&shared);
        }
    }
    // Leaving: the signal now, the proxy's endpoint update after the propagation delay.
    let signalled = Instant::now();
    if let Some(pid) = pid.and_then(|pid| Pid::from_raw(pid as i32)) {
        let signal = match config.scale_in {
            ScaleIn::Kill => Signal::KILL,
            ScaleIn::Drain | ScaleIn::Graceful => Signal::TERM,
        };
        let _ = kill_process(pid, signal);
    }
    let proxy = Arc::clone(&shared.proxy);
    let (delay, server) = (config.propagation_delay, name.clone());
    let endpoint = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if behind_proxy {
            let _ = proxy.drain(&server).await;
        }
    });
    if tokio::time::timeout(config.grace_period, child.wait())
        .await
        .is_err()
    {
        shared.state().events.killed_at_grace += 1;
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let _ = endpoint.await;
    if behind_proxy && shared.proxy.remove(&name).await.is_err() {
        shared.state().events.unremoved += 1;
    }
    shared.state().departures.push(Departure {
        signalled,
        gone: Instant::now(),
    });
    leave(&shared);
}

/// Resolves once the pod is told to leave (or its fleet is gone).
async fn told_to_leave(told: &mut watch::Receiver<bool>) {
    let _ = told.wait_for(|&told| told).await;
}

/// Starts a replica's process, in a CPU cgroup when the fleet has a quota.
fn start(
    config: &FleetConfig,
    name: &str,
    id: u64,
) -> Result<(tokio::process::Child, CpuMeter), String> {
    let on_sigterm = match config.scale_in {
        ScaleIn::Graceful => OnSigterm::Graceful,
        ScaleIn::Drain | ScaleIn::Kill => OnSigterm::Drain,
    };
    let mut args: Vec<String> = vec![
        "replica".to_owned(),
        "--name".to_owned(),
        name.to_owned(),
        "--seed".to_owned(),
        (id + 1).to_string(),
        "--on-sigterm".to_owned(),
        clap::ValueEnum::to_possible_value(&on_sigterm)
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default(),
    ];
    args.extend(config.replica_args.iter().cloned());
    let (command, cgroup) = match config.cpus {
        Some(cpus) => {
            let cgroup = Cgroup::cpu(&format!("admit-cluster-{name}"), cpus)?;
            (
                cgroup.command(&config.binary, &args),
                Some(Arc::new(cgroup)),
            )
        }
        None => {
            let mut command = std::process::Command::new(&config.binary);
            command.args(&args);
            (command, None)
        }
    };
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|error| format!("spawning {}: {error}", config.binary.display()))?;
    // What a replica says on stderr is a problem: passed on, named.
    if let Some(stderr) = child.stderr.take() {
        let name = name.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{name}: {line}");
            }
        });
    }
    let meter = match (cgroup, child.id()) {
        (Some(cgroup), _) => CpuMeter::Cgroup(cgroup),
        (None, Some(pid)) => CpuMeter::Process(pid),
        (None, None) => return Err("the process exited at once".to_owned()),
    };
    Ok((child, meter))
}

/// The address from the replica's `<name> listening on <addr>` line; the rest of its output is
/// read and dropped, so it never blocks on a full pipe.
async fn read_address(stdout: Option<tokio::process::ChildStdout>) -> Option<SocketAddr> {
    let mut lines = BufReader::new(stdout?).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, addr)) = line.split_once(" listening on ") {
                return addr.trim().parse().ok();
            }
        }
        None
    })
    .await
    .ok()
    .flatten()?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(addr)
}
