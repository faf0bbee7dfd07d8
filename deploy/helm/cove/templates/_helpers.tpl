{{/* The release's name for Cove's objects. */}}
{{- define "cove.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "cove.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (api, node, postgresql). */}}
{{- define "cove.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The image of Cove's containers. */}}
{{- define "cove.image" -}}
{{- required "image.repository is required: an image holding cove, cove-sandbox and runsc" .Values.image.repository -}}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret holding the node token and the database's DSN. */}}
{{- define "cove.secret" -}}
{{- printf "%s-secret" (include "cove.fullname" .) -}}
{{- end -}}

{{/* The env entries every Cove role reads: the database, the node token and the object store. */}}
{{- define "cove.clusterEnv" -}}
- name: COVE_DATABASE
  valueFrom:
    secretKeyRef:
      {{- if .Values.database.external.existingSecret }}
      name: {{ .Values.database.external.existingSecret }}
      key: {{ .Values.database.external.secretKey }}
      {{- else }}
      name: {{ include "cove.secret" . }}
      key: dsn
      {{- end }}
- name: COVE_NODE_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.nodeToken.existingSecret | default (include "cove.secret" .) }}
      key: node-token
{{- if .Values.objectStore.url }}
- name: COVE_OBJECT_STORE
  value: {{ .Values.objectStore.url | quote }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.objectStore.existingSecret | default (include "cove.secret" .) }}
      key: access-key
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.objectStore.existingSecret | default (include "cove.secret" .) }}
      key: secret-key
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- name: COVE_SECRETS_KEY_FILE
  value: /etc/cove/secrets-key/secrets.key
{{- end }}
{{- if .Values.identityKey.existingSecret }}
- name: COVE_IDENTITY_KEY_FILE
  value: /etc/cove/identity-key/identity.key
{{- if .Values.identityKey.issuer }}
- name: COVE_IDENTITY_ISSUER
  value: {{ .Values.identityKey.issuer | quote }}
{{- end }}
{{- end }}
{{- if .Values.nodeTLS.existingSecret }}
- name: COVE_NODE_TLS_CERT
  value: /etc/cove/node-tls/tls.crt
- name: COVE_NODE_TLS_KEY
  value: /etc/cove/node-tls/tls.key
- name: COVE_NODE_TLS_CA
  value: /etc/cove/node-tls/ca.crt
- name: COVE_NODE_TLS_SERVER_NAME
  value: cove-node
{{- end }}
{{- end -}}

{{/* The node API's TLS files and the secrets key, mounted where cove.clusterEnv says. */}}
{{- define "cove.nodeTLSMount" -}}
{{- if .Values.nodeTLS.existingSecret }}
- name: node-tls
  mountPath: /etc/cove/node-tls
  readOnly: true
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  mountPath: /etc/cove/secrets-key
  readOnly: true
{{- end }}
{{- if .Values.identityKey.existingSecret }}
- name: identity-key
  mountPath: /etc/cove/identity-key
  readOnly: true
{{- end }}
{{- end -}}

{{- define "cove.nodeTLSVolume" -}}
{{- if .Values.nodeTLS.existingSecret }}
- name: node-tls
  secret:
    secretName: {{ .Values.nodeTLS.existingSecret }}
    defaultMode: 0400
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  secret:
    secretName: {{ .Values.secretsKey.existingSecret }}
    defaultMode: 0400
    items:
      - key: secrets.key
        path: secrets.key
{{- end }}
{{- if .Values.identityKey.existingSecret }}
- name: identity-key
  secret:
    secretName: {{ .Values.identityKey.existingSecret }}
    defaultMode: 0400
    items:
      - key: identity.key
        path: identity.key
{{- end }}
{{- end -}}

{{/* Prometheus metrics: the pod annotations and the container port. */}}
{{- define "cove.metricsAnnotations" -}}
{{- if .Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{- define "cove.metricsPort" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}
{{- end -}}

{{- define "cove.metricsEnv" -}}
{{- if .Values.metrics.enabled }}
- name: COVE_METRICS_LISTEN
  value: "0.0.0.0:{{ .Values.metrics.port }}"
{{- end }}
{{- end -}}

{{/* The scrapers' way in to the metrics port (NetworkPolicy ingress). */}}
{{- define "cove.metricsIngress" -}}
{{- if and .Values.metrics.enabled .Values.metrics.scrapeFrom }}
- from:
    {{- toYaml .Values.metrics.scrapeFrom | nindent 4 }}
  ports:
    - port: {{ .Values.metrics.port }}
      protocol: TCP
{{- end }}
{{- end -}}
