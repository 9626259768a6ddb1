{{/*
The permissions of each component, written once and used by both the Roles (namespaced installs)
and the ClusterRoles (watch.clusterWide). Least privilege, and why each rule is there:
- the controller writes only the status of DAGs and DagRuns (spec belongs to the user or GitOps):
  no update/patch on the main resources, so it cannot change what users asked for;
- Secrets and ConfigMaps: only `list`, and only with rbac.readVariablesAndConnections, to learn
  which ones carry the zonda.dev/variables or zonda.dev/connections label and which keys they hold;
  task pods reference the keys their tasks name and the kubelet resolves them, so no value is kept
  or logged by the controller (the local executor alone reads the values it hands a try);
- Leases (leader election) are granted only in the release namespace, by a separate Role.
*/}}

{{- define "zonda.controllerRules" -}}
- apiGroups: ["zonda.dev"]
  resources: ["dags"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["zonda.dev"]
  resources: ["dags/status"]
  verbs: ["patch", "update"]
- apiGroups: ["zonda.dev"]
  resources: ["dagruns"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["zonda.dev"]
  resources: ["dagruns/status"]
  verbs: ["patch", "update"]
{{- /* A big run's task instances (past --inline-task-instances), in objects the run owns. */}}
- apiGroups: ["zonda.dev"]
  resources: ["dagrunshards"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["zonda.dev"]
  resources: ["dagrunshards/status"]
  verbs: ["update"]
- apiGroups: ["zonda.dev"]
  resources: ["triggers"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["zonda.dev"]
  resources: ["backfills"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["zonda.dev"]
  resources: ["backfills/status"]
  verbs: ["patch", "update"]
- apiGroups: ["zonda.dev"]
  resources: ["pools"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["zonda.dev"]
  resources: ["pools/status"]
  verbs: ["patch", "update"]
{{- /* Data-aware scheduling: assets (the controller creates them and writes their status) and their events. */}}
- apiGroups: ["zonda.dev"]
  resources: ["assets"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["zonda.dev"]
  resources: ["assets/status"]
  verbs: ["patch", "update"]
- apiGroups: ["zonda.dev"]
  resources: ["assetevents"]
  verbs: ["get", "list", "watch", "create", "delete"]
{{- /* A mapped KubernetesPodOperator's items in the Kubernetes XCom backend: read by name. */}}
- apiGroups: ["zonda.dev"]
  resources: ["xcomchunks"]
  verbs: ["get"]
{{ include "zonda.controllerPodRules" . }}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* Task pods: created, watched, logs read (for `zonda logs` and failure reasons), deleted; patched
     only to remove their finalizer zonda.dev/try-tracking (docs/reliability.md). */}}
{{- define "zonda.controllerPodRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
{{- if .Values.rbac.readVariablesAndConnections }}
- apiGroups: [""]
  resources: ["configmaps", "secrets"]
  verbs: ["list"]
{{- end }}
{{- end }}

{{- define "zonda.triggererRules" -}}
- apiGroups: ["zonda.dev"]
  resources: ["triggers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["zonda.dev"]
  resources: ["triggers/status"]
  verbs: ["patch", "update"]
{{- /* an asset watcher's events are AssetEvents */}}
- apiGroups: ["zonda.dev"]
  resources: ["assetevents"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- with .Values.triggerer.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Leases in the release namespace: the controller's leader election, or with --shards its shard,
member and slot ledger Leases (a long-gone replica's member Lease is deleted). */}}
{{- define "zonda.controllerLeaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
{{- end }}

{{/* Leases in the release namespace: the triggerer's shard ownership (released by deleting). */}}
{{- define "zonda.triggererLeaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
{{- end }}
