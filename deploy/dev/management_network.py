"""The management cluster's network in the local AWS (moto), as the stack's kube emulator
expects it: the VPC the management cluster runs in, with one private subnet per zone
tagged for internal load balancers (where its cloud provider puts the NLBs of the hosted
control planes' private Services, behind the PrivateLink endpoint services).

  management_network.py --endpoint URL --region REGION --cluster NAME

Idempotent: the VPC is found by its tags (`Name=<cluster>`,
`kubernetes.io/cluster/<cluster>=owned`), each subnet by VPC and zone; what is missing is
made. Prints the environment lines for .dev/env:

  HCPFLOW_MANAGEMENT_VPC_ID=vpc-...
  HCPFLOW_MANAGEMENT_SUBNET_IDS=subnet-a,subnet-b,...   (in zone order a..f)

Uses boto3 (installed with moto in the stack's venv) with moto's test credentials.
"""

import argparse

import boto3

VPC_CIDR = "10.250.0.0/16"
ZONE_LETTERS = "abcdef"


def tags(pairs):
    return [{"Key": k, "Value": v} for k, v in pairs.items()]


def ensure(endpoint, region, cluster):
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=region,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    cluster_tag = f"kubernetes.io/cluster/{cluster}"
    found = ec2.describe_vpcs(Filters=[
        {"Name": "tag:Name", "Values": [cluster]},
        {"Name": f"tag:{cluster_tag}", "Values": ["owned"]},
    ])["Vpcs"]
    if found:
        vpc_id = sorted(v["VpcId"] for v in found)[0]
    else:
        vpc_id = ec2.create_vpc(CidrBlock=VPC_CIDR, TagSpecifications=[{
            "ResourceType": "vpc",
            "Tags": tags({"Name": cluster, cluster_tag: "owned"}),
        }])["Vpc"]["VpcId"]
    existing = {s["AvailabilityZone"]: s for s in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]}
    subnet_ids = []
    for index, letter in enumerate(ZONE_LETTERS):
        zone = f"{region}{letter}"
        subnet_tags = {"Name": f"{cluster}-private-{zone}", cluster_tag: "shared",
                       "kubernetes.io/role/internal-elb": "1"}
        subnet = existing.get(zone)
        if subnet is None:
            subnet = ec2.create_subnet(
                VpcId=vpc_id, CidrBlock=f"10.250.{index}.0/24", AvailabilityZone=zone,
                TagSpecifications=[{"ResourceType": "subnet", "Tags": tags(subnet_tags)}],
            )["Subnet"]
        else:
            have = {t["Key"]: t["Value"] for t in subnet.get("Tags", [])}
            if any(have.get(k) != v for k, v in subnet_tags.items()):
                ec2.create_tags(Resources=[subnet["SubnetId"]], Tags=tags(subnet_tags))
        subnet_ids.append(subnet["SubnetId"])
    return vpc_id, subnet_ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args()
    vpc_id, subnet_ids = ensure(args.endpoint, args.region, args.cluster)
    print(f"HCPFLOW_MANAGEMENT_VPC_ID={vpc_id}")
    print(f"HCPFLOW_MANAGEMENT_SUBNET_IDS={','.join(subnet_ids)}")


if __name__ == "__main__":
    main()
