//! Twilio's side of an SMS test: an incoming text message signed as Twilio signs it (the
//! account's auth token over the public webhook URL and the form's fields), and the text a
//! reply posted to the Messages API carried.

/// The account every test's messages come from.
pub const ACCOUNT_SID: &str = "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b";
/// The app's own number, which every test's messages go to.
pub const TO: &str = "+15557654321";

/// Text message `n` from `from` saying `text`, signed with `token` for `url` (the public
/// `…/webhooks/twilio`): its `X-Twilio-Signature` and its form body.
pub fn signed_message(token: &str, url: &str, from: &str, n: u64, text: &str) -> (String, String) {
    let params: Vec<(String, String)> = [
        ("MessageSid", format!("SM{n:032}")),
        ("AccountSid", ACCOUNT_SID.into()),
        ("From", from.into()),
        ("To", TO.into()),
        ("Body", text.into()),
        ("NumMedia", "0".into()),
        ("SmsStatus", "received".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let signature = channels::twilio::sign(token.as_bytes(), url, &params);
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter())
        .finish();
    (signature, body)
}

/// The `Body` of a form posted to Twilio's Messages API.
pub fn body_of(form: &str) -> String {
    form_urlencoded::parse(form.as_bytes())
        .find(|(k, _)| k == "Body")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}
