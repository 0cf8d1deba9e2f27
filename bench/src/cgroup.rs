//! Lambda's CPU share for a memory size, applied to one process through a
//! cgroup: `memory / 1769` of one vCPU (1,769 MB is one full vCPU), as a
//! CFS quota over a 20 ms period. cgroup v2 (`cpu.max`) or v1
//! (`cpu.cfs_quota_us`, `cpu.cfs_period_us`), whichever has a writable cpu
//! controller; creating groups needs root.

use std::path::{Path, PathBuf};

/// The CFS period, in microseconds.
pub const PERIOD_US: u64 = 20_000;
/// The memory size that buys one full vCPU.
pub const ONE_VCPU_MB: u64 = 1_769;

/// The quota, in microseconds per period, for `memory_mb`.
pub fn quota_us(memory_mb: u64) -> u64 {
    (PERIOD_US * memory_mb / ONE_VCPU_MB).clamp(1_000, PERIOD_US * 2)
}

/// Where CPU quotas can be written.
#[derive(Debug, Clone)]
pub enum Controller {
    /// The unified hierarchy, at this directory.
    V2(PathBuf),
    /// The v1 `cpu` hierarchy, at this directory.
    V1(PathBuf),
}

impl Controller {
    /// Finds a writable cpu controller, or says why there is none.
    pub fn detect() -> Result<Self, String> {
        let mounts = std::fs::read_to_string("/proc/mounts").map_err(|e| format!("/proc/mounts: {e}"))?;
        let mut reasons = Vec::new();
        for line in mounts.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, dir, kind, options, ..] = fields[..] else {
                continue;
            };
            let candidate = match kind {
                "cgroup2" => Self::V2(PathBuf::from(dir)),
                "cgroup" if options.split(',').any(|o| o == "cpu") => Self::V1(PathBuf::from(dir)),
                _ => continue,
            };
            match candidate.probe() {
                Ok(()) => return Ok(candidate),
                Err(reason) => reasons.push(format!("{dir}: {reason}")),
            }
        }
        if reasons.is_empty() {
            reasons.push("no cgroup filesystem is mounted".into());
        }
        Err(reasons.join("; "))
    }

    /// Creates, configures and removes a probe group.
    fn probe(&self) -> Result<(), String> {
        let group = Group::create(self, &format!("probe-{}", std::process::id()))?;
        group.limit(Some(quota_us(128)))?;
        group.limit(None)
    }
}

/// One cgroup holding one measured process.
pub struct Group {
    dir: PathBuf,
    v2: bool,
}

impl Group {
    /// Creates `agent-server-bench-<name>` under the controller's root.
    pub fn create(controller: &Controller, name: &str) -> Result<Self, String> {
        let (root, v2) = match controller {
            Controller::V2(root) => (root, true),
            Controller::V1(root) => (root, false),
        };
        if v2 {
            // The children of the root get a cpu controller only if the
            // root delegates it; if it already does, this changes nothing.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
        }
        let dir = root.join(format!("agent-server-bench-{name}"));
        // A group left behind holds its counters, and maybe a process: never
        // measure in one.
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let group = Self { dir, v2 };
        let control = if v2 { "cpu.max" } else { "cpu.cfs_quota_us" };
        if !group.dir.join(control).exists() {
            return Err(format!("{} has no {control}", group.dir.display()));
        }
        if !v2 {
            write(&group.dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        }
        Ok(group)
    }

    /// Limits the group to `quota` microseconds per period, or lifts the limit.
    pub fn limit(&self, quota: Option<u64>) -> Result<(), String> {
        if self.v2 {
            let quota = quota.map_or("max".to_string(), |q| q.to_string());
            write(&self.dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))
        } else {
            let quota = quota.map_or("-1".to_string(), |q| q.to_string());
            write(&self.dir.join("cpu.cfs_quota_us"), &quota)
        }
    }

    /// The file a process writes its pid to in order to join the group.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Fails while a process is still inside; the caller waits for it first.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("write {value:?} to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::quota_us;

    #[test]
    fn lambda_shares() {
        assert_eq!(quota_us(128), 1_447);
        assert_eq!(quota_us(1_769), 20_000);
        assert_eq!(quota_us(512), 5_788);
    }
}
