"""The demo's view of the local AWS (moto) and Kubernetes emulator, from outside hcpflow.

  demo_aws.py prerequisites OUT_DIR NAME   create what HyperShift expects to exist before a
                                           cluster (OIDC bucket, public zone, management VPC
                                           with a subnet per AZ), idempotently, and write
                                           OUT_DIR/cluster.yaml for `hcpflow cluster create -f`
  demo_aws.py holdings INFRA_ID NAME BUCKET BASE_DOMAIN NAMESPACE
                                           count what moto and the emulator hold of a cluster

Uses boto3 (installed with moto in the stack's venv) against HCPFLOW_DEV_MOTO_ENDPOINT
and plain HTTP to HCPFLOW_KUBE_URL.
"""

import json
import os
import sys
import urllib.request

import boto3

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
REGION = "us-east-1"


def clients():
    endpoint = os.environ.get("HCPFLOW_DEV_MOTO_ENDPOINT") or os.environ["HCPFLOW_AWS_ENDPOINT"]
    session = boto3.session.Session(region_name=REGION)
    return {name: session.client(name, endpoint_url=endpoint)
            for name in ("s3", "ec2", "route53", "iam")}


def tag(key, value):
    return {"Key": key, "Value": value}


def prerequisites(out_dir, name):
    aws = clients()
    bucket = "hcpflow-demo-oidc"
    base_domain = "hcpflow-demo.example.com"
    aws["s3"].create_bucket(Bucket=bucket)
    aws["s3"].put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                       "Resource": f"arn:aws:s3:::{bucket}/*"}]}))
    zones = aws["route53"].list_hosted_zones_by_name(DNSName=base_domain)["HostedZones"]
    if not any(z["Name"] == base_domain + "." for z in zones):
        aws["route53"].create_hosted_zone(Name=base_domain, CallerReference="hcpflow-demo-public")
    vpcs = aws["ec2"].describe_vpcs(
        Filters=[{"Name": "tag:Name", "Values": ["hcpflow-demo-management"]}])["Vpcs"]
    if vpcs:
        vpc_id = vpcs[0]["VpcId"]
    else:
        vpc_id = aws["ec2"].create_vpc(CidrBlock="10.200.0.0/16", TagSpecifications=[{
            "ResourceType": "vpc", "Tags": [tag("Name", "hcpflow-demo-management")]}])["Vpc"]["VpcId"]
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in aws["ec2"].describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]}
    for index, zone in enumerate(ZONES):
        if zone not in subnets:
            subnets[zone] = aws["ec2"].create_subnet(
                VpcId=vpc_id, AvailabilityZone=zone,
                CidrBlock=f"10.200.{index}.0/24")["Subnet"]["SubnetId"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "pull-secret.json"), "w") as f:
        f.write('{"auths": {"quay.io": {"auth": "ZGVtbzpub3QtYS1yZWFsLXNlY3JldA=="}}}\n')
    with open(os.path.join(out_dir, "id_ed25519.pub"), "w") as f:
        f.write("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemoKeyOnlyForTheLocalStack hcpflow-demo\n")
    spec = f"""# A 3-AZ hosted cluster with PrivateLink, as `make demo` creates it.
name: {name}
region: {REGION}
zones: [{", ".join(ZONES)}]
base_domain: {base_domain}
endpoint_access: PublicAndPrivate
vpc_cidr: 10.0.0.0/16
oidc_bucket: {bucket}
namespace: clusters
management:
  vpc_id: {vpc_id}
  subnet_ids: [{", ".join(subnets[z] for z in ZONES)}]
release_image: quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64
pull_secret_file: pull-secret.json
ssh_public_key_file: id_ed25519.pub
node_pools:
""" + "".join(f"""  - name: {name}-{zone}
    zone: {zone}
    replicas: 2
    instance_type: m6i.xlarge
""" for zone in ZONES)
    path = os.path.join(out_dir, "cluster.yaml")
    with open(path, "w") as f:
        f.write(spec)
    print(f"  OIDC bucket      {bucket} (public read by bucket policy)")
    print(f"  public zone      {base_domain}")
    print(f"  management VPC   {vpc_id}, subnets {' '.join(subnets[z] for z in ZONES)}")
    print(f"  cluster file     {path}")


def kube_count(path):
    url = os.environ["HCPFLOW_KUBE_URL"].rstrip("/") + path
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return len(json.load(response).get("items", []))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return 0
        raise


def holdings(infra_id, name, bucket, base_domain, namespace):
    aws = clients()
    ec2 = aws["ec2"]
    owned = [{"Name": f"tag:kubernetes.io/cluster/{infra_id}", "Values": ["owned"]}]
    vpcs = [v["VpcId"] for v in ec2.describe_vpcs(Filters=owned)["Vpcs"]]
    subnets = nats = endpoints = 0
    for vpc in vpcs:
        by_vpc = [{"Name": "vpc-id", "Values": [vpc]}]
        subnets += len(ec2.describe_subnets(Filters=by_vpc)["Subnets"])
        nats += sum(1 for n in ec2.describe_nat_gateways(Filters=by_vpc)["NatGateways"]
                    if n["State"] not in ("deleted", "deleting"))
        endpoints += len(ec2.describe_vpc_endpoints(Filters=by_vpc)["VpcEndpoints"])
    eips = len(ec2.describe_addresses(Filters=owned)["Addresses"])
    roles = sum(1 for r in aws["iam"].list_roles(MaxItems=1000)["Roles"]
                if r["RoleName"].startswith(infra_id + "-"))
    providers = sum(1 for p in aws["iam"].list_open_id_connect_providers()["OpenIDConnectProviderList"]
                    if p["Arn"].endswith("/" + infra_id))
    documents = aws["s3"].list_objects_v2(Bucket=bucket, Prefix=infra_id + "/").get("KeyCount", 0)
    zone_names = {f"{name}.{base_domain}.", f"{name}.hypershift.local."}
    zones = sum(1 for z in aws["route53"].list_hosted_zones()["HostedZones"] if z["Name"] in zone_names)
    selector = f"?labelSelector=hypershift.openshift.io/auto-created-for-infra%3D{infra_id}"
    hosted = kube_count(f"/apis/hypershift.openshift.io/v1beta1/namespaces/{namespace}/hostedclusters{selector}")
    pools = kube_count(f"/apis/hypershift.openshift.io/v1beta1/namespaces/{namespace}/nodepools{selector}")
    secrets = kube_count(f"/api/v1/namespaces/{namespace}/secrets{selector}")
    rows = [("VPCs", len(vpcs)), ("subnets", subnets), ("NAT gateways", nats),
            ("Elastic IPs", eips), ("VPC endpoints", endpoints), ("IAM roles", roles),
            ("OIDC providers", providers), ("OIDC documents", documents),
            ("private + local zones", zones), ("HostedClusters", hosted),
            ("NodePools", pools), ("Secrets", secrets)]
    print("  " + ", ".join(f"{label} {count}" for label, count in rows))
    total = sum(count for _, count in rows)
    print(f"  total: {total} object(s) of {infra_id}")
    return total


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "prerequisites" and len(sys.argv) == 4:
        prerequisites(sys.argv[2], sys.argv[3])
    elif command == "holdings" and len(sys.argv) == 7:
        holdings(*sys.argv[2:7])
    else:
        sys.exit(__doc__)
