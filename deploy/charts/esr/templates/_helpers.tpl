{{- /* Names and labels. Every define trims the whitespace around it, so this file renders to nothing. */ -}}
{{- define "esr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "esr.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "esr.name" . -}}
{{- end -}}
{{- end -}}
{{- define "esr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "esr.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
{{- define "esr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "esr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "esr.labels" -}}
{{ include "esr.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
{{- define "esr.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- /* "true" when the cluster is OpenShift (it serves security.openshift.io/v1), else "". */ -}}
{{- define "esr.isOpenShift" -}}
{{- if .Capabilities.APIVersions.Has "security.openshift.io/v1" -}}
true
{{- end -}}
{{- end -}}
{{- /* A securityContext value as YAML, without its `enabled` key. On OpenShift
(global.compatibility.openshift.adaptSecurityContext: auto, or force anywhere) runAsUser,
runAsGroup and fsGroup are left out, for the platform assigns them from the namespace's range;
so is an empty seLinuxOptions.
Usage: include "esr.securityContext" (dict "securityContext" .Values.securityContext "context" $) */ -}}
{{- define "esr.securityContext" -}}
{{- $sc := omit .securityContext "enabled" -}}
{{- $mode := .context.Values.global.compatibility.openshift.adaptSecurityContext -}}
{{- if or (eq $mode "force") (and (eq $mode "auto") (include "esr.isOpenShift" .context)) -}}
{{- $sc = omit $sc "fsGroup" "runAsUser" "runAsGroup" -}}
{{- if not .securityContext.seLinuxOptions -}}
{{- $sc = omit $sc "seLinuxOptions" -}}
{{- end -}}
{{- end -}}
{{- toYaml $sc -}}
{{- end -}}
{{- /* Fails on value combinations that cannot work. */ -}}
{{- define "esr.checkValues" -}}
{{- if and (not .Values.processPushSecret) .Values.processClusterPushSecret -}}
{{- fail "processClusterPushSecret needs processPushSecret: a ClusterPushSecret works through the PushSecrets it creates. Set processClusterPushSecret: false too." -}}
{{- end -}}
{{- end -}}
