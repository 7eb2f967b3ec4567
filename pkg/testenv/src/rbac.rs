//! Who may do what, for tests of identities: RBAC from the repository's deploy/ manifests,
//! applied to the test apiserver as a user would (server-side apply), so a test runs a
//! component with only the grants deploy/ gives it; and a ValidatingAdmissionPolicy that
//! admits a write only from one user, so the apiserver itself checks who a component is.

use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize;

/// Applies every ClusterRole, ClusterRoleBinding, Role and RoleBinding of the multi-document
/// YAML file `path`; panics naming the file and object when one fails or a document is of
/// another kind.
pub async fn apply_file(client: &Client, path: impl AsRef<Path>) {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let pp = PatchParams::apply("hypercloud-testenv").force();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        let ns = value["metadata"]["namespace"].as_str().unwrap_or("default");
        let patch = Patch::Apply(&value);
        let result = match value["kind"].as_str() {
            Some("ClusterRole") => Api::<ClusterRole>::all(client.clone())
                .patch(name, &pp, &patch)
                .await
                .map(drop),
            Some("ClusterRoleBinding") => Api::<ClusterRoleBinding>::all(client.clone())
                .patch(name, &pp, &patch)
                .await
                .map(drop),
            Some("Role") => Api::<Role>::namespaced(client.clone(), ns)
                .patch(name, &pp, &patch)
                .await
                .map(drop),
            Some("RoleBinding") => Api::<RoleBinding>::namespaced(client.clone(), ns)
                .patch(name, &pp, &patch)
                .await
                .map(drop),
            other => panic!("{}: {other:?} {name} is not RBAC", path.display()),
        };
        result.unwrap_or_else(|e| panic!("applying {name} from {}: {e}", path.display()));
    }
}

/// Creates a ValidatingAdmissionPolicy `name` and its binding that refuse every UPDATE of the
/// core-group `resource` (e.g. `nodes`, `services/status`) for which the CEL `condition`
/// holds, unless `username` makes it: the apiserver itself then checks who writes. The
/// refusal reads "`resource` written by USER". Remove with [`remove_policy`].
pub async fn admit_only(
    client: &Client,
    name: &str,
    resource: &str,
    condition: &str,
    username: &str,
) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use kube::api::PostParams;
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": [resource],
            }]},
            "matchConditions": [{"name": "scope", "expression": condition}],
            "validations": [{
                "expression": format!("request.userInfo.username == '{username}'"),
                "messageExpression": format!("'{resource} written by ' + request.userInfo.username"),
            }],
        },
    }))
    .expect("policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }))
    .expect("binding");
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap_or_else(|e| panic!("creating ValidatingAdmissionPolicy {name}: {e}"));
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("creating ValidatingAdmissionPolicyBinding {name}: {e}"));
}

/// Deletes what [`admit_only`] created (errors ignored: cleanup).
pub async fn remove_policy(client: &Client, name: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let dp = kube::api::DeleteParams::default();
    let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .delete(name, &dp)
        .await;
    let _ = Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .delete(name, &dp)
        .await;
}
