//! Who may reach a listener (allowed CIDRs) and how lists filter and page.

use super::*;

/// Like [`ask`], from source address `src`.
async fn ask_from(src: &str, addr: SocketAddr) -> std::io::Result<String> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    sock.bind(format!("{src}:0").parse().unwrap())?;
    read_answer(within("connect", sock.connect(addr)).await?).await
}

#[tokio::test]
async fn allowed_cidrs_refuse_other_sources() {
    let c = cloud("127.0.107.0/24").await;
    let (a, _a_task) = backend("alpha").await;
    let lb = make_lb(&c, &[a]).await;
    let allow = async |cidrs: Value| {
        update_listener(&c, &lb.lb, &lb.listener, json!({ "allowed_cidrs": cidrs })).await;
    };
    allow(json!(["127.0.0.3/32"])).await;
    assert_eq!(ask_from("127.0.0.3", lb.vip).await.unwrap(), "alpha");
    // Refused: closed before the backend says anything.
    let refused = ask_from("127.0.0.4", lb.vip).await;
    assert!(
        refused.as_deref().map_or(true, str::is_empty),
        "{refused:?}"
    );

    // Lifted: everyone again.
    allow(Value::Null).await;
    assert_eq!(ask_from("127.0.0.4", lb.vip).await.unwrap(), "alpha");
}

/// List filters answered from the store's index (name, vip_port_id, description, a name given
/// twice = either), a filter the view computes (`operating_status`) still applied, and
/// `limit`/`marker` pages whose `loadbalancers_links` `next` leads through every load balancer
/// in creation order, filters kept.
#[tokio::test]
async fn list_filters_and_pages_follow_links() {
    let c = cloud("127.1.207.0/24").await;
    let mut made = Vec::new();
    for i in 0..5 {
        let r = c
            .post(
                &format!("{LBAAS}/loadbalancers"),
                json!({"loadbalancer": {"name": format!("page-{i}"), "description": if i % 2 == 0 { "even" } else { "odd" },
                    "vip_network_id": "net"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        made.push((
            r.id("loadbalancer"),
            r.body["loadbalancer"]["vip_port_id"].clone(),
        ));
    }
    for (lb, _) in &made {
        wait_lb_active(&c, lb).await;
    }
    let names = |v: &Value| -> Vec<String> {
        v["loadbalancers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // The filtered lists, order aside (created_at has whole seconds; ties go by id).
    let sorted = |v: &Value| -> Vec<String> {
        let mut n = names(v);
        n.sort();
        n
    };
    let r = c.get(&format!("{LBAAS}/loadbalancers?name=page-3")).await;
    assert_eq!(names(&r.body), ["page-3"]);
    let r = c
        .get(&format!("{LBAAS}/loadbalancers?name=page-3&name=page-1"))
        .await;
    assert_eq!(sorted(&r.body), ["page-1", "page-3"]);
    let r = c
        .get(&format!(
            "{LBAAS}/loadbalancers?description=even&name=page-3"
        ))
        .await;
    assert!(names(&r.body).is_empty(), "{}", r.body);
    if let Some(port) = made[2].1.as_str() {
        let r = c
            .get(&format!("{LBAAS}/loadbalancers?vip_port_id={port}"))
            .await;
        assert_eq!(names(&r.body), ["page-2"]);
    }
    let r = c
        .get(&format!(
            "{LBAAS}/loadbalancers?description=even&operating_status=ONLINE"
        ))
        .await;
    assert_eq!(sorted(&r.body), ["page-0", "page-2", "page-4"]);
    let r = c
        .get(&format!(
            "{LBAAS}/loadbalancers?description=even&operating_status=OFFLINE"
        ))
        .await;
    assert!(names(&r.body).is_empty(), "{}", r.body);

    // Pages of 2 through the links: the whole list, in its order.
    let whole = names(&c.get(&format!("{LBAAS}/loadbalancers")).await.body);
    let mut url = format!("{LBAAS}/loadbalancers?limit=2");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let r = c.get(&url).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        seen.extend(names(&r.body));
        pages += 1;
        assert!(pages <= 5, "the links never end: {}", r.body);
        let next = r.body["loadbalancers_links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["rel"] == "next"))
            .and_then(|l| l["href"].as_str())
            .map(str::to_owned);
        match next {
            Some(href) => url = href.strip_prefix(&c.url).unwrap().to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, whole);
    seen.sort();
    assert_eq!(seen, ["page-0", "page-1", "page-2", "page-3", "page-4"]);
    assert_eq!(pages, 3);
    let r = c
        .get(&format!("{LBAAS}/loadbalancers?description=odd&limit=1"))
        .await;
    assert_eq!(names(&r.body).len(), 1, "{}", r.body);
    let next = r.body["loadbalancers_links"][0]["href"].as_str().unwrap();
    assert!(next.contains("description=odd"), "{next}");
    let r = c
        .get(&format!("{LBAAS}/loadbalancers?marker=no-such-id"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    c.shutdown().await;
}
