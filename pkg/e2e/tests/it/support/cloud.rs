//! A real `hypercloud local-cloud serve` in a temporary state directory, started through the
//! `local-cloud` personality and driven with its operator commands
//! (`hypercloud_testenv::localcloud`).

use std::path::PathBuf;

use hypercloud_testenv::localcloud::{cli_command_json, Serve};
use serde_json::Value;

use super::process::{run, Bin};

/// The region the local cloud names in its catalog.
pub const REGION: &str = "RegionOne";

/// An instance as the cloud reports it.
#[derive(Clone, Debug)]
pub struct Instance {
    pub id: String,
    pub name: String,
    pub zone: String,
    pub flavor: String,
    /// Its fixed address on the `private` network (127.1.0.0/16, so a real local address).
    pub address: String,
}

/// A running local cloud.
pub struct LocalCloud {
    // Fields drop in order: the server (printing its log on failure) before its directory.
    pub serve: Serve,
    pub state: PathBuf,
    bin: Bin,
    tmp: tempfile::TempDir,
}

impl LocalCloud {
    /// Serves on free loopback ports with the availability `zones` (comma-separated) and
    /// load balancer VIPs from `vip_pool`; returns once the API answers.
    pub fn start(bin: &Bin, vip_pool: &str, zones: &str) -> LocalCloud {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let mut cmd = bin.command("local-cloud");
        cmd.arg("--v=2");
        let serve = Serve::start_command(
            cmd,
            &state,
            &["--availability-zones", zones, "--lb-vip-pool", vip_pool],
        );
        LocalCloud {
            serve,
            state,
            bin: bin.clone(),
            tmp,
        }
    }

    /// `local-cloud ARGS -o json` (an operator command), decoded.
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let args = [args, &["-o", "json"]].concat();
        cli_command_json(self.bin.command("local-cloud"), &self.state, &args)
    }

    pub fn create_instance(&self, name: &str, zone: &str, flavor: &str) -> Instance {
        let s = self.cli_json(&[
            "instance", "create", name, "--zone", zone, "--flavor", flavor,
        ]);
        let address = s["addresses"]["private"][0]["addr"]
            .as_str()
            .unwrap()
            .to_owned();
        Instance {
            id: s["id"].as_str().unwrap().to_owned(),
            name: s["name"].as_str().unwrap().to_owned(),
            zone: s["OS-EXT-AZ:availability_zone"]
                .as_str()
                .unwrap()
                .to_owned(),
            flavor: s["flavor"]["original_name"].as_str().unwrap().to_owned(),
            address,
        }
    }

    /// Creates a volume; its ID.
    pub fn create_volume(&self, name: &str, zone: &str) -> String {
        let v = self.cli_json(&["volume", "create", name, "--zone", zone]);
        assert_eq!(v["availability_zone"], zone);
        v["id"].as_str().unwrap().to_owned()
    }

    /// A cloud.conf for the `local` provider pointing at this cloud; with `instance`, the
    /// `[Metadata]` section a node uses to learn which instance it is (on one machine every
    /// node calls the metadata service from 127.0.0.1, so it names itself, as in
    /// hack/local-up.sh).
    pub fn cloud_conf(&self, file: &str, instance: Option<&Instance>) -> PathBuf {
        let mut text = self.serve.cloud_conf();
        if let Some(i) = instance {
            text.push_str(&format!(
                "[Metadata]\nsearch-order = metadataService\nmetadata-url = {}\ninstance-id = {}\n",
                self.serve.metadata_url, i.id
            ));
        }
        let path = self.tmp.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `local-cloud ARGS` (an operator command without output, e.g. `instance stop NAME`).
    pub fn cli(&self, args: &[&str]) {
        let mut cmd = self.bin.command("local-cloud");
        cmd.arg("--state-dir").arg(&self.state).args(args);
        run(cmd);
    }

    /// The command that prints this cloud's instances as JSON, for the kubelets' power switch
    /// (`hypercloud_testenv::cluster::Kubelets`).
    pub fn instances_command(&self) -> Vec<String> {
        vec![
            self.bin.path("local-cloud").display().to_string(),
            "--state-dir".into(),
            self.state.display().to_string(),
            "instance".into(),
            "list".into(),
            "-o".into(),
            "json".into(),
        ]
    }

    /// Octavia's load balancers whose name ends with `suffix`.
    pub fn load_balancers(&self, suffix: &str) -> Vec<Value> {
        self.serve.load_balancers(suffix)
    }
}
