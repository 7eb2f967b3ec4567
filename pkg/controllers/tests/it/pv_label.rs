//! The PV-label controller against the real apiserver.

use super::*;

#[tokio::test]
async fn pv_label_controller_labels_cloud_volumes() {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let env = TestEnv::new("pv-label").await.expect("testenv");
    let name = env.unique_name("pv");
    let volume = env.unique_name("vol");
    let cloud = FakeCloud::new(FakeConfig {
        region: "r1".into(),
        volumes: vec![hypercloud_cloudprovider::fake::FakeVolume {
            id: volume.clone(),
            zone: Some("z1".into()),
            region: None,
        }],
        ..Default::default()
    });
    let api: Api<PersistentVolume> = Api::all(env.client());
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity("1Gi".into()))].into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: "cinder.csi.openstack.org".into(),
                volume_handle: volume.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    create(&api, &pv, "create pv").await;
    let running = start(
        env.client(),
        &cloud,
        &[names::PV_LABEL.name],
        &[],
        Scope::default(),
    );
    let labelled = eventually("pv labelled", || async {
        let pv = api.get(&name).await.ok()?;
        pv.labels()
            .contains_key(wellknown::LABEL_TOPOLOGY_ZONE)
            .then_some(pv)
    })
    .await;
    assert_eq!(labelled.labels()[wellknown::LABEL_TOPOLOGY_ZONE], "z1");
    assert_eq!(labelled.labels()[wellknown::LABEL_TOPOLOGY_REGION], "r1");
    let terms = labelled
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .expect("node affinity");
    let keys: Vec<String> = terms[0]
        .match_expressions
        .iter()
        .flatten()
        .map(|e| e.key.clone())
        .collect();
    assert_eq!(
        keys,
        vec![
            wellknown::LABEL_TOPOLOGY_REGION.to_string(),
            wellknown::LABEL_TOPOLOGY_ZONE.to_string()
        ]
    );
    running.stop().await;
    let _ = api.delete(&name, &DeleteParams::default()).await;
    env.cleanup().await.expect("cleanup");
}
