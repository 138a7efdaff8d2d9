//! Idempotent AWS activities (EC2, IAM, Route53, ELBv2, S3) and their compensating
//! deletes, plus the tag sweep.
//!
//! Status: empty. The activities arrive with the "AWS activities" issue; the AWS SDK is
//! not yet a dependency, so nothing here talks to AWS yet.
