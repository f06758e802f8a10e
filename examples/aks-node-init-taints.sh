#!/bin/sh
# AKS: new nodes start with nodeready's startup taint as a node
# initialization taint.
#
# Where it goes: run with the Azure CLI against your cluster. Set
# RESOURCE_GROUP and CLUSTER first.
#
# --node-init-taints (alias --nodepool-initialization-taints), NOT
# --node-taints:
#   - node initialization taints are put on a node when it is created and
#     may be removed through the Kubernetes API; AKS does not put them back
#     on that node. That is what the nodeready agent does.
#   - --node-taints are node pool taints that AKS manages: they cannot be
#     changed through the Kubernetes API, so the agent could not release the
#     node.
#
# As documented by Microsoft (Use node taints in AKS), initialization taints
# are a preview: they need the aks-preview CLI extension and the
# NodeInitializationTaintsPreview feature, and the CLI sets them for all node
# pools of the cluster (az aks create / az aks update). For a single pool, set
# nodeInitializationTaints on that pool in agentPoolProfiles of the managed
# cluster (ARM/Bicep, a managed-cluster-level update). Do that when the cluster
# has Windows pools: nodeready serves Linux nodes only, so a Windows node would
# keep the taint. After az aks update, VMSS nodes show the taints only once an
# operation updates the VMSS model (a node image or Kubernetes upgrade); az aks
# create sets them from the start.
#
# Without the preview, install manifests/node-creation/startup-taint.yaml
# (Kubernetes 1.36+), which taints every new Linux node except those of system
# pools (kubernetes.azure.com/mode=system) and virtual nodes
# (type=virtual-kubelet); to hold only one pool, give it a label
#   az aks nodepool update -g "$RESOURCE_GROUP" --cluster-name "$CLUSTER" \
#     --name userpool --labels example.com/pool=user
# and add that label to the objectSelector of the policy's binding.
set -eu

az extension add --name aks-preview --upgrade
az feature register --namespace Microsoft.ContainerService --name NodeInitializationTaintsPreview
# Wait until it shows "Registered", then refresh the provider:
az feature show --namespace Microsoft.ContainerService --name NodeInitializationTaintsPreview --query properties.state
az provider register --namespace Microsoft.ContainerService

az aks update \
  --resource-group "$RESOURCE_GROUP" \
  --name "$CLUSTER" \
  --node-init-taints "node-ready/unverified=true:NoSchedule"
