"""The demo's view of the local AWS (moto) and Kubernetes emulator, from outside hcpflow.

  demo_aws.py prerequisites OUT_DIR NAME   create what HyperShift expects to exist before a
                                           cluster (OIDC bucket, public zone), idempotently,
                                           and write OUT_DIR/cluster.yaml for `hcpflow cluster
                                           create -f` with the stack's management network
  demo_aws.py privatelink INFRA_ID NAME    show the PrivateLink the HyperShift operators made
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
    # The management cluster's network: the stack made it (its subnets tagged for internal
    # load balancers, where the emulated operators put theirs).
    vpc_id = os.environ["HCPFLOW_MANAGEMENT_VPC_ID"]
    subnet_ids = os.environ["HCPFLOW_MANAGEMENT_SUBNET_IDS"].split(",")
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in aws["ec2"].describe_subnets(
        SubnetIds=subnet_ids)["Subnets"]}
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


def privatelink(infra_id, name):
    ec2 = clients()["ec2"]
    route53 = clients()["route53"]
    owned = [{"Name": f"tag:kubernetes.io/cluster/{infra_id}", "Values": ["owned"]}]
    for vpc in [v["VpcId"] for v in ec2.describe_vpcs(Filters=owned)["Vpcs"]]:
        endpoints = ec2.describe_vpc_endpoints(Filters=[
            {"Name": "vpc-id", "Values": [vpc]}, {"Name": "tag-key", "Values": ["AWSEndpointService"]}])
        for endpoint in endpoints["VpcEndpoints"]:
            if endpoint["State"].lower() in ("deleted", "deleting"):
                continue
            service = next(t["Value"] for t in endpoint["Tags"] if t["Key"] == "AWSEndpointService")
            zones = sorted(s["AvailabilityZone"] for s in ec2.describe_subnets(
                SubnetIds=endpoint["SubnetIds"])["Subnets"]) if endpoint["SubnetIds"] else []
            print(f"  endpoint {endpoint['VpcEndpointId']} ({service}) in {', '.join(zones)} "
                  f"→ {endpoint['ServiceName']}")
    for zone in route53.list_hosted_zones_by_name(DNSName=f"{name}.hypershift.local")["HostedZones"]:
        if zone["Name"] != f"{name}.hypershift.local.":
            continue
        for record in route53.list_resource_record_sets(HostedZoneId=zone["Id"])["ResourceRecordSets"]:
            if record["Type"] == "CNAME":
                target = record["ResourceRecords"][0]["Value"]
                print(f"  record   {record['Name'].replace(chr(92) + '052', '*')} → {target}")


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
    subnets = nats = endpoints = groups = 0
    for vpc in vpcs:
        by_vpc = [{"Name": "vpc-id", "Values": [vpc]}]
        subnets += len(ec2.describe_subnets(Filters=by_vpc)["Subnets"])
        nats += sum(1 for n in ec2.describe_nat_gateways(Filters=by_vpc)["NatGateways"]
                    if n["State"] not in ("deleted", "deleting"))
        endpoints += sum(1 for e in ec2.describe_vpc_endpoints(Filters=by_vpc)["VpcEndpoints"]
                         if e["State"].lower() not in ("deleted", "deleting"))
        groups += sum(1 for g in ec2.describe_security_groups(Filters=by_vpc)["SecurityGroups"]
                      if g["GroupName"] != "default")
    services = sum(1 for s in ec2.describe_vpc_endpoint_service_configurations()["ServiceConfigurations"]
                   if any(t["Key"] == f"kubernetes.io/cluster/{infra_id}" for t in s.get("Tags", [])))
    # What the guest makes: load balancers (classic and v2), volumes, the registry bucket,
    # the public *.apps record.
    tag_key = f"kubernetes.io/cluster/{infra_id}"
    session = boto3.session.Session(region_name=REGION)
    endpoint = os.environ.get("HCPFLOW_DEV_MOTO_ENDPOINT") or os.environ["HCPFLOW_AWS_ENDPOINT"]
    elb = session.client("elb", endpoint_url=endpoint)
    elbv2 = session.client("elbv2", endpoint_url=endpoint)
    load_balancers = 0
    for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]:
        tags = elb.describe_tags(LoadBalancerNames=[lb["LoadBalancerName"]])["TagDescriptions"]
        load_balancers += any(t["Key"] == tag_key for d in tags for t in d.get("Tags", []))
    for lb in elbv2.describe_load_balancers()["LoadBalancers"]:
        tags = elbv2.describe_tags(ResourceArns=[lb["LoadBalancerArn"]])["TagDescriptions"]
        load_balancers += any(t["Key"] == tag_key for d in tags for t in d.get("Tags", []))
    volumes = len(ec2.describe_volumes(Filters=owned)["Volumes"])
    registry = sum(1 for b in aws["s3"].list_buckets()["Buckets"]
                   if b["Name"].startswith(f"{infra_id}-image-registry-"))
    apps = 0
    for zone in aws["route53"].list_hosted_zones_by_name(DNSName=base_domain)["HostedZones"]:
        if zone["Name"] == base_domain + ".":
            apps += sum(1 for r in aws["route53"].list_resource_record_sets(
                HostedZoneId=zone["Id"])["ResourceRecordSets"]
                if r["Name"].replace("\\052", "*") == f"*.apps.{name}.{base_domain}.")
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
            ("Elastic IPs", eips), ("VPC endpoints", endpoints), ("security groups", groups),
            ("endpoint services", services), ("guest load balancers", load_balancers),
            ("guest volumes", volumes), ("registry buckets", registry),
            ("public *.apps records", apps), ("IAM roles", roles),
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
    elif command == "privatelink" and len(sys.argv) == 4:
        privatelink(sys.argv[2], sys.argv[3])
    elif command == "holdings" and len(sys.argv) == 7:
        holdings(*sys.argv[2:7])
    else:
        sys.exit(__doc__)
