//! VMware's vCenter simulator (`vcsim`, from govmomi) for the vsphere provider's tests, and
//! `govc`, VMware's CLI, to change and cross-check its inventory. Both are built once by
//! `hack/vcsim.sh build` (pinned in hack/versions.env); each [`Vcsim`] is its own simulator
//! process on a free port of 127.0.0.1 (or another loopback address, [`Vcsim::start_on`], so
//! that two simulators are two vCenters of different server names) with user `user`,
//! password `pass`, killed when dropped.
//!
//! The default inventory (`vcsim` without flags): datacenter `DC0` with a standalone host
//! `DC0_H0` (VMs `DC0_H0_VM0`, `DC0_H0_VM1`) and cluster `DC0_C0` of three hosts (VMs
//! `DC0_C0_RP0_VM0`, `DC0_C0_RP0_VM1`), datastore `LocalDS_0`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::process::{free_port, Proc};

static BIN: OnceLock<PathBuf> = OnceLock::new();

/// The directory with `vcsim` and `govc`, building them on first use (`hack/vcsim.sh bin`).
pub fn bin_dir() -> &'static Path {
    BIN.get_or_init(|| crate::hack_bin_dir("vcsim.sh"))
}

/// A running simulator.
pub struct Vcsim {
    proc: Proc,
    host: String,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Vcsim {
    /// Starts `vcsim` with the default inventory plus `flags` (e.g. `["-vm", "3"]`) and waits
    /// until `govc about` answers.
    pub fn start(flags: &[&str]) -> Vcsim {
        Vcsim::start_on("127.0.0.1", flags)
    }

    /// As [`Vcsim::start`], listening on `host`, a loopback address such as `127.0.0.2`
    /// (Linux routes all of 127.0.0.0/8 to the loopback interface). The port is one free on
    /// 127.0.0.1, which vcsim then binds on `host`.
    pub fn start_on(host: &str, flags: &[&str]) -> Vcsim {
        let dir = tempfile::tempdir().expect("temp dir for vcsim");
        let port = free_port();
        let mut cmd = Command::new(bin_dir().join("vcsim"));
        cmd.arg("-l")
            .arg(format!("{host}:{port}"))
            .args(["-username", "user", "-password", "pass"])
            .args(flags);
        let proc = Proc::spawn("vcsim", cmd, dir.path().join("vcsim.log"));
        let mut sim = Vcsim {
            proc,
            host: host.to_owned(),
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if sim.govc_output(&["about"]).status.success() {
                return sim;
            }
            assert!(sim.proc.running(), "vcsim exited:\n{}", sim.proc.log());
            assert!(
                Instant::now() < deadline,
                "vcsim not answering after 60s:\n{}",
                sim.proc.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address it listens on (127.0.0.1 unless started with [`Vcsim::start_on`]): the
    /// vCenter's server name in a `vsphere.conf`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `https://user:pass@HOST:PORT/sdk`, for `GOVC_URL`.
    pub fn url(&self) -> String {
        format!("https://user:pass@{}:{}/sdk", self.host, self.port)
    }

    /// A legacy INI `vsphere.conf` for it (datacenter DC0, zone/region categories
    /// `k8s-zone`/`k8s-region`) with `extra` appended.
    pub fn ini_conf(&self, extra: &str) -> String {
        format!(
            "[Global]\nuser = \"user\"\npassword = \"pass\"\nport = \"{}\"\ninsecure-flag = \"1\"\ndatacenters = \"DC0\"\n\n[VirtualCenter \"{}\"]\n\n[Labels]\nregion = \"k8s-region\"\nzone = \"k8s-zone\"\n{extra}",
            self.port, self.host
        )
    }

    /// Its `[VirtualCenter "HOST"]` section with its own port (for a config of several
    /// simulators, whose `[Global]` has the user, password and datacenters).
    pub fn ini_section(&self) -> String {
        format!(
            "[VirtualCenter \"{}\"]\nport = \"{}\"\n",
            self.host, self.port
        )
    }

    /// The same as YAML, cloud-provider-vsphere's format.
    pub fn yaml_conf(&self, extra: &str) -> String {
        format!(
            "global:\n  user: user\n  password: pass\n  port: {}\n  insecure-flag: true\n  datacenters:\n    - DC0\nvcenter:\n  local:\n    server: {}\nlabels:\n  region: k8s-region\n  zone: k8s-zone\n{extra}",
            self.port, self.host
        )
    }

    /// `govc ARGS` against this simulator.
    pub fn govc_output(&self, args: &[&str]) -> Output {
        Command::new(bin_dir().join("govc"))
            .args(args)
            .env("GOVC_URL", self.url())
            .env("GOVC_INSECURE", "1")
            .output()
            .unwrap_or_else(|e| panic!("running govc {args:?}: {e}"))
    }

    /// `govc ARGS`, which must succeed; its stdout.
    pub fn govc(&self, args: &[&str]) -> String {
        let out = self.govc_output(args);
        assert!(
            out.status.success(),
            "govc {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `config.uuid` of a VM by inventory path (e.g. `/DC0/vm/DC0_H0_VM0`).
    pub fn vm_uuid(&self, path: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&self.govc(&["vm.info", "-json", path])).expect("govc json");
        let vms = v
            .get("virtualMachines")
            .or_else(|| v.get("VirtualMachines"))
            .and_then(|v| v.as_array())
            .expect("virtualMachines in govc vm.info -json");
        vms.first()
            .and_then(|vm| vm.pointer("/config/uuid"))
            .and_then(|u| u.as_str())
            .expect("config.uuid")
            .to_string()
    }

    /// Gives a VM a guest host name and IPv4 address (`govc vm.customize` needs it powered
    /// off; it is powered on again).
    pub fn set_guest(&self, vm: &str, hostname: &str, ip: &str) {
        self.govc(&["vm.power", "-off", "-force", vm]);
        self.govc(&[
            "vm.customize",
            "-vm",
            vm,
            "-name",
            hostname,
            "-ip",
            ip,
            "-netmask",
            "255.255.255.0",
        ]);
        self.govc(&["vm.power", "-on", vm]);
    }

    /// Creates the `k8s-zone` and `k8s-region` tag categories and attaches `zone` to `zone_obj`
    /// and `region` to `region_obj` (inventory paths).
    pub fn tag_zone(&self, zone_obj: &str, zone: &str, region_obj: &str, region: &str) {
        for (cat, tag, obj) in [
            ("k8s-zone", zone, zone_obj),
            ("k8s-region", region, region_obj),
        ] {
            // The category may exist from an earlier call.
            let _ = self.govc_output(&["tags.category.create", cat]);
            let _ = self.govc_output(&["tags.create", "-c", cat, tag]);
            self.govc(&["tags.attach", "-c", cat, tag, obj]);
        }
    }

    /// Ends every SOAP session whose user agent contains `agent` (`govc session.rm`), as an
    /// administrator or an idle timeout would; returns how many.
    pub fn end_sessions_of(&self, agent: &str) -> usize {
        let list = self.govc(&["session.ls"]);
        let keys: Vec<String> = list
            .lines()
            .skip(1)
            .filter(|l| l.contains(agent))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        for k in &keys {
            self.govc(&["session.rm", k]);
        }
        keys.len()
    }

    /// The simulator's log so far.
    pub fn log(&self) -> String {
        self.proc.log()
    }
}
