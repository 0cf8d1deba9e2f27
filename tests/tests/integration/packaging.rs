//! What the shipped binaries are built with. `sam build` and `make package`
//! run `cargo lambda build --bin <function>` at the workspace root, where
//! cargo unifies features over the default members: those must be the three
//! functions, or the test crate's in-memory store and the SDK's test
//! utilities would be compiled into every Lambda binary.

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
    for function in ["update-api-key", "update-mcp-server", "update-model"] {
        assert!(
            shared.contains(&format!("{function} feature \"default\" (command-line)")),
            "{shared}"
        );
    }
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
