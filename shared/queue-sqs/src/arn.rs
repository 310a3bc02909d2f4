//! A queue's URL from its ARN, with no I/O: what a Lambda SQS record names its queue by
//! (`eventSourceARN`) is not what SQS calls take (`QueueUrl`).

/// The URL of the queue `arn` names (`arn:<partition>:sqs:<region>:<account>:<name>`), in the
/// form SQS documents (`https://sqs.<region>.<domain>/<account>/<name>`), or `None` when `arn`
/// is not an SQS queue's ARN. SQS takes the URL as a parameter; the client's endpoint (and
/// `AWS_ENDPOINT_URL`) decides where the call goes.
pub fn queue_url_from_arn(arn: &str) -> Option<String> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("sqs"), Some(region), Some(account), Some(name)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if ![partition, region, account, name].into_iter().all(plain) {
        return None;
    }
    let domain = match partition {
        "aws-cn" => "amazonaws.com.cn",
        _ => "amazonaws.com",
    };
    Some(format!("https://sqs.{region}.{domain}/{account}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_arn_becomes_its_url() {
        assert_eq!(
            queue_url_from_arn("arn:aws:sqs:eu-west-1:123456789012:bridle-turns.fifo").as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/123456789012/bridle-turns.fifo")
        );
        assert_eq!(
            queue_url_from_arn("arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo").as_deref(),
            Some("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo")
        );
    }

    #[test]
    fn anything_else_is_none() {
        for arn in [
            "",
            "arn:aws:sns:eu-west-1:123456789012:topic",
            "arn:aws:sqs:eu-west-1:123456789012",
            "arn:aws:sqs:eu-west-1::q.fifo",
            "arn:aws:sqs:eu-west-1:123456789012:q/../other",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo",
        ] {
            assert_eq!(queue_url_from_arn(arn), None, "{arn}");
        }
    }
}
