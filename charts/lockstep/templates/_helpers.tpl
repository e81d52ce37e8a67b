{{/* The image of every component. */}}
{{- define "lockstep.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "lockstep.labels" -}}
app.kubernetes.io/name: lockstep
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (scheduler, controllers, webhook). */}}
{{- define "lockstep.selector" -}}
app.kubernetes.io/name: lockstep
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The pod settings every component shares; called with root and component. */}}
{{- define "lockstep.podSpec" -}}
{{- $v := .root.Values -}}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
priorityClassName: {{ $v.priorityClassName }}
securityContext:
{{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with $v.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.spreadReplicas }}
topologySpreadConstraints:
{{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
- maxSkew: 1
  topologyKey: {{ . }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "lockstep.selector" $ | nindent 6 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* HTTP probes on a component's health port. */}}
{{- define "lockstep.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: health}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: health}
  periodSeconds: 5
  failureThreshold: 3
{{- end -}}
