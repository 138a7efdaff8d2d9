//! Reading a pull secret from AWS Secrets Manager, in the region its ARN names. The
//! value is returned to the one activity that writes it into the hosted cluster; errors
//! name the ARN and AWS's code, never the value.

use aws_config::Region;
use hcpflow_engine::ActivityFailure;
use hcpflow_hypershift::pull_secret_ref::{SecretsManagerArn, SecretsManagerRef};

use crate::clients::AwsClients;
use crate::error::from_sdk;

/// The secret's `SecretString` (its current version).
pub async fn secret_string(
    clients: &AwsClients,
    reference: &SecretsManagerRef,
) -> Result<String, ActivityFailure> {
    let arn = SecretsManagerArn::parse(&reference.arn)
        .map_err(|problem| ActivityFailure::permanent("InvalidInput", problem))?;
    let config = aws_sdk_secretsmanager::config::Builder::from(&clients.sdk)
        .region(Region::new(arn.region.to_owned()))
        .build();
    let client = aws_sdk_secretsmanager::Client::from_conf(config);
    let answer = client
        .get_secret_value()
        .secret_id(&reference.arn)
        .send()
        .await
        .map_err(|e| {
            let error = from_sdk(e);
            let doing = format!("reading the pull secret {}", reference.arn);
            // Not found is the user's to fix, not AWS catching up.
            let failure = error.into_failure(false);
            ActivityFailure {
                message: format!("{doing}: {}", failure.message),
                ..failure
            }
        })?;
    answer.secret_string.ok_or_else(|| {
        ActivityFailure::permanent(
            "InvalidPullSecret",
            format!(
                "the secret {} holds binary data, not a .dockerconfigjson string",
                reference.arn
            ),
        )
    })
}
