//! What the shipped binaries are built with. `sam build` and `make package`
//! run `cargo lambda build --bin <function>` at the workspace root, where
//! cargo unifies features over the default members: that must be the
//! functions' package alone, or the test crate's in-memory store and the SDK's test
//! utilities would be compiled into every Lambda binary. And `bench/`, a
//! workspace of its own, must build its floors with the same profile.

use std::collections::BTreeMap;
use std::process::Command;

use integration_tests::repo_root;

/// `cargo tree`'s features of `package` as the root's default members
/// (plus `extra` arguments) select them.
fn features_of(package: &str, extra: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args([
            "tree",
            "--locked",
            "--offline",
            "--edges",
            "features",
            "--invert",
            package,
        ])
        .args(extra)
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("cargo tree prints UTF-8")
}

#[test]
fn a_build_at_the_root_compiles_the_functions_with_their_own_features_only() {
    let shared = features_of("agent-server-shared", &[]);
    assert!(
        shared.contains("agent-server-functions feature \"default\" (command-line)"),
        "{shared}"
    );
    assert!(!shared.contains("integration-tests v"), "{shared}");
    assert!(!shared.contains("local-api v"), "{shared}");
    assert!(!shared.contains("feature \"memory-store\""), "{shared}");
    let dynamodb = features_of("aws-sdk-dynamodb", &[]);
    assert!(!dynamodb.contains("feature \"test-util\""), "{dynamodb}");
    let kms = features_of("aws-sdk-kms", &[]);
    assert!(!kms.contains("feature \"test-util\""), "{kms}");
}

#[test]
fn the_whole_workspace_does_switch_the_test_features_on() {
    // The check above would notice: over the workspace, they are on.
    let shared = features_of("agent-server-shared", &["--workspace"]);
    assert!(shared.contains("feature \"memory-store\""), "{shared}");
    let dynamodb = features_of("aws-sdk-dynamodb", &["--workspace"]);
    assert!(dynamodb.contains("feature \"test-util\""), "{dynamodb}");
}

/// A manifest's `[profile.release...]` sections: each header with its
/// settings (spaces, comments and blank lines left out), sorted.
fn release_profile(manifest: &str) -> BTreeMap<String, Vec<String>> {
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            current = line.starts_with("[profile.release").then(|| line.to_string());
            if let Some(section) = &current {
                sections.entry(section.clone()).or_default();
            }
        } else if let Some(section) = &current {
            let setting: String = line
                .split('#')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            if !setting.is_empty() {
                sections.entry(section.clone()).or_default().push(setting);
            }
        }
    }
    sections.values_mut().for_each(|settings| settings.sort());
    sections
}

#[test]
fn the_bench_builds_its_floors_with_the_functions_release_profile() {
    let read = |path: &str| {
        let path = repo_root().join(path);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let functions = release_profile(&read("Cargo.toml"));
    assert!(
        functions
            .get("[profile.release]")
            .is_some_and(|settings| settings.contains(&"lto=\"fat\"".to_string())),
        "{functions:?}"
    );
    assert_eq!(release_profile(&read("bench/Cargo.toml")), functions);
}

/// No npm install phones home: every package.json whose tree holds Scarf (an
/// install-time analytics script, under swagger-ui) turns it off, and the
/// Makefile, which runs every install, sets Scarf's own switch.
#[test]
fn npm_installs_send_no_analytics() {
    let root = repo_root();
    let makefile = std::fs::read_to_string(root.join("Makefile")).expect("Makefile");
    assert!(
        makefile
            .lines()
            .any(|line| line.trim() == "export SCARF_ANALYTICS := false"),
        "the Makefile does not export SCARF_ANALYTICS=false"
    );
    let mut checked = 0;
    for dir in [
        "tools/docs",
        "tools/clients",
        "tools/guard",
        "tools/dynamodb-local",
    ] {
        let lock = std::fs::read_to_string(root.join(dir).join("package-lock.json")).unwrap_or_default();
        if !lock.contains("@scarf/scarf") {
            continue;
        }
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join(dir).join("package.json")).expect("package.json"),
        )
        .expect("package.json is JSON");
        assert_eq!(
            manifest["scarfSettings"]["enabled"], false,
            "{dir}: Scarf left on"
        );
        checked += 1;
    }
    assert!(checked > 0, "no install holds Scarf any more: drop this test");
}
