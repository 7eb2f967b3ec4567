//! `local-cloud cloudstack-keys`: a user's CloudStack API key and secret key, through the
//! CloudStack dialect's own `listUsers` and `getUserKeys` ([`crate::api::cloudstack`]) with
//! the operator's session (its Keystone token as CloudStack's `sessionkey`), so scripts can
//! configure a CloudStack client (`cs`, go-cloudstack, the cloudstack provider's
//! `api-key`/`secret-key`).

use super::*;

/// `GET /client/api` with `params` and the client's session key; the answer's inner object.
async fn cloudstack(client: &Client, command: &str, params: &[(&str, &str)]) -> Result<Value> {
    let mut all: Vec<(&str, &str)> = vec![
        ("command", command),
        ("response", "json"),
        ("sessionkey", &client.token),
    ];
    all.extend_from_slice(params);
    // Pairs of strings always encode.
    let query = serde_urlencoded::to_string(&all).unwrap_or_default();
    let answer = client.get(&format!("/client/api?{query}")).await?;
    Ok(answer[format!("{}response", command.to_lowercase())].clone())
}

pub(super) async fn cloudstack_keys(client: &Client, args: CloudStackKeysArgs) -> Result<()> {
    let CloudStackKeysArgs { user, output } = args;
    let users = cloudstack(client, "listUsers", &[("username", &user)]).await?;
    let id = users["user"][0]["id"]
        .as_str()
        .ok_or_else(|| Error::NotFound {
            what: "user",
            name: user.clone(),
        })?
        .to_owned();
    let keys = cloudstack(client, "getUserKeys", &[("id", &id)]).await?;
    let keys = &keys["userkeys"];
    let url = format!("{}/client/api", client.base);
    let shown = json!({
        "user": user, "user_id": id, "api_key": keys["apikey"], "secret_key": keys["secretkey"],
        "api_url": if client.local.is_some() { Value::Null } else { json!(url) },
    });
    print(output.output, &shown, || {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut rows = vec![
            vec!["user".to_owned(), user.clone()],
            vec!["api key".to_owned(), s(&keys["apikey"])],
            vec!["secret key".to_owned(), s(&keys["secretkey"])],
        ];
        if client.local.is_none() {
            rows.push(vec!["api url".to_owned(), url.clone()]);
        }
        rows
    });
    Ok(())
}
