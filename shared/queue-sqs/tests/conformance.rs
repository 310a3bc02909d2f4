//! The queue conformance suite, against moto_server (`AWS_ENDPOINT_URL`), each check on a fresh
//! FIFO queue made with the settings it needs. What SQS or moto cannot show is named in
//! [`common::MOTO_SQS`].

mod common;

queue::queue_conformance_tests!(fidelity = common::MOTO_SQS, |settings| {
    common::TestQueue::new(settings).await
});
