{{/* The prefix of every name: `app-operator` (config/default's namePrefix), or fullnameOverride. */}}
{{- define "app-operator.fullname" -}}
{{- default "app-operator" .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "app-operator.labels" -}}
app.kubernetes.io/name: app-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' selector (config/manager's). */}}
{{- define "app-operator.selectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: app-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "app-operator.serviceAccountName" -}}
{{ include "app-operator.fullname" . }}-controller-manager
{{- end -}}

{{/* The operator image: repository, then @digest or :tag (default the appVersion). */}}
{{- define "app-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* What the controller does in the namespaces it watches (config/rbac/role.yaml, without the
namespaces rule, which the cluster-wide and namespace-scoped modes grant differently). */}}
{{- define "app-operator.managerRules" -}}
- apiGroups: ["apps.kudevops.io"]
  resources: ["appservices"]
  verbs: ["list", "watch"]
- apiGroups: ["apps.kudevops.io"]
  resources: ["appservices/status"]
  verbs: ["patch"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end -}}

{{- define "app-operator.eventsRule" -}}
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
