//! Neutron networks: records, their view and the create/update/delete handlers.

use super::*;

impl View for Network {
    fn view(&self, r: &impl Read) -> Value {
        let mut subnets: Vec<String> = r
            .list::<Subnet>(SUBNETS)
            .into_iter()
            .filter(|s| s.network_id == self.meta.id)
            .map(|s| s.meta.id)
            .collect();
        subnets.sort();
        self.meta.neutron_view(
            json!({
                "id": self.meta.id, "name": self.name, "status": "ACTIVE", "admin_state_up": self.admin_state_up,
                "shared": self.shared, "router:external": self.external, "mtu": self.mtu,
                "description": self.description, "subnets": subnets, "availability_zones": ["nova"],
                "availability_zone_hints": [], "port_security_enabled": true, "is_default": false,
                "ipv4_address_scope": null, "ipv6_address_scope": null, "l2_adjacency": true,
            }),
        )
    }
}

pub(crate) fn new_network(
    tx: &mut Tx<'_>,
    name: &str,
    project_id: &str,
    external: bool,
) -> Result<Network, ApiError> {
    let n = Network {
        meta: Meta::new(project_id),
        name: name.into(),
        admin_state_up: true,
        shared: false,
        external,
        mtu: 1450,
        description: String::new(),
    };
    tx.put(NETWORKS, &n.meta.id, &n)?;
    Ok(n)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct NetworkBody {
    name: Option<String>,
    admin_state_up: Option<bool>,
    shared: Option<bool>,
    #[serde(rename = "router:external")]
    external: Option<bool>,
    mtu: Option<u32>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    port_security_enabled: Option<bool>,
    availability_zone_hints: Option<Value>,
    #[serde(rename = "provider:network_type")]
    _network_type: Option<Value>,
    #[serde(rename = "provider:physical_network")]
    _physical_network: Option<Value>,
    #[serde(rename = "provider:segmentation_id")]
    _segmentation_id: Option<Value>,
    dns_domain: Option<Value>,
    qos_policy_id: Option<Value>,
    is_default: Option<bool>,
}

impl Create for Network {
    type Body = NetworkBody;

    fn create(tx: &mut Tx<'_>, caller: &Caller, b: NetworkBody) -> Result<Self, ApiError> {
        let project_id = b.project_id.clone().or(b.tenant_id.clone());
        let mut n = new_network(
            tx,
            b.name.as_deref().unwrap_or(""),
            &project_of(caller, &project_id),
            b.external.unwrap_or(false),
        )?;
        n.admin_state_up = b.admin_state_up.unwrap_or(true);
        n.shared = b.shared.unwrap_or(false);
        n.mtu = b.mtu.unwrap_or(1450);
        n.description = b.description.unwrap_or_default();
        tx.put(NETWORKS, &n.meta.id.clone(), &n)?;
        Ok(n)
    }
}

impl Update for Network {
    type Body = NetworkBody;

    fn update(&mut self, _: &mut Tx<'_>, b: NetworkBody) -> Result<(), ApiError> {
        set_given!(self <- b: name, admin_state_up, shared, external, mtu, description);
        Ok(())
    }
}

impl Release for Network {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        let id = &self.meta.id;
        if tx.list::<Port>(PORTS).iter().any(|p| &p.network_id == id) {
            return Err(ApiError::conflict(
                "NetworkInUse",
                format!("Unable to complete operation on network {id}. There are one or more ports still in use on the network."),
            ));
        }
        for s in tx.list::<Subnet>(SUBNETS) {
            if &s.network_id == id {
                tx.delete(SUBNETS, &s.meta.id);
            }
        }
        Ok(())
    }
}
