{{/*
Names, labels and the few computed lists every template shares.
*/}}

{{- define "zonda.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-scoped prefix of every resource name; the release name alone when it already says "zonda". */}}
{{- define "zonda.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Cluster-scoped objects carry the release namespace too, so two releases of one name never collide. */}}
{{- define "zonda.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "zonda.fullname" .) }}
{{- end }}

{{- define "zonda.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "zonda.selectorLabels" -}}
app.kubernetes.io/name: {{ include "zonda.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "zonda.labels" -}}
helm.sh/chart: {{ include "zonda.chart" . }}
{{ include "zonda.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: zonda
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of one component: include with (dict "root" $ "component" "controller"). */}}
{{- define "zonda.componentLabels" -}}
{{ include "zonda.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "zonda.componentSelectorLabels" -}}
{{ include "zonda.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "zonda.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "zonda.controllerServiceAccountName" -}}
{{- default (printf "%s-controller" (include "zonda.fullname" .)) .Values.controller.serviceAccount.name }}
{{- end }}

{{- define "zonda.triggererServiceAccountName" -}}
{{- default (printf "%s-triggerer" (include "zonda.fullname" .)) .Values.triggerer.serviceAccount.name }}
{{- end }}

{{- define "zonda.taskServiceAccountName" -}}
{{- default (printf "%s-task" (include "zonda.fullname" .)) .Values.taskPods.serviceAccount.name }}
{{- end }}

{{/*
The namespaces the components act in, as a JSON list (fromJsonArray it): the listed ones, or the
release namespace. Meaningless with watch.clusterWide (every namespace).
*/}}
{{- define "zonda.watchedNamespaces" -}}
{{- if .Values.watch.namespaces }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/*
The namespaces task pods run in (JSON list): taskPods.namespace when set, else the watched
namespaces; with watch.clusterWide and no taskPods.namespace, the release namespace only (the others
are unknown at install time).
*/}}
{{- define "zonda.taskNamespaces" -}}
{{- if .Values.taskPods.namespace }}
{{- list .Values.taskPods.namespace | toJson }}
{{- else if .Values.watch.clusterWide }}
{{- list .Release.Namespace | toJson }}
{{- else }}
{{- include "zonda.watchedNamespaces" . }}
{{- end }}
{{- end }}

{{/* Arguments that scope a component to its namespaces. */}}
{{- define "zonda.namespaceArgs" -}}
{{- if .Values.watch.clusterWide }}
- --all-namespaces
{{- else }}
{{- range (include "zonda.watchedNamespaces" . | fromJsonArray) }}
- --namespace={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* The writable /tmp every container gets, as the root filesystem is read-only. */}}
{{- define "zonda.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end }}

{{/* Environment every component shares: who and where it is (downward API) and how it logs. */}}
{{- define "zonda.commonEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: ZONDA_LOG_FORMAT
  value: {{ .Values.logging.format | quote }}
- name: HOME
  value: /tmp
{{- end }}

{{/*
Name of a namespaced object the release puts in another namespace: prefixed with the release
namespace there, so two releases of one name (from different namespaces) never collide.
Include with (dict "root" $ "namespace" NS "suffix" "controller").
*/}}
{{- define "zonda.namespacedName" -}}
{{- if eq .namespace .root.Release.Namespace }}
{{- printf "%s-%s" (include "zonda.fullname" .root) .suffix }}
{{- else }}
{{- printf "%s-%s-%s" .root.Release.Namespace (include "zonda.fullname" .root) .suffix }}
{{- end }}
{{- end }}

{{/* The XCom backend, checked against backendUrl (an fsspec URL goes with the fsspec backend only). */}}
{{- define "zonda.xcomBackend" -}}
{{- $backend := .Values.xcom.backend }}
{{- if and (eq $backend "fsspec") (not .Values.xcom.backendUrl) }}
{{- fail "xcom.backend=fsspec needs xcom.backendUrl (e.g. s3://bucket/zonda-xcom)" }}
{{- end }}
{{- if and .Values.xcom.backendUrl (ne $backend "fsspec") }}
{{- fail (printf "xcom.backendUrl is set but xcom.backend is %s: set xcom.backend=fsspec to use the URL" $backend) }}
{{- end }}
{{- $backend }}
{{- end }}
