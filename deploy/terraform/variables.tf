variable "namespace" {
  description = "The Kubernetes namespace Cove is installed in (created by this module)."
  type        = string
  default     = "cove"
}

variable "release_name" {
  description = "The Helm release's name; Cove's objects are named after it."
  type        = string
  default     = "cove"
}

variable "image_repository" {
  description = "An image holding /usr/local/bin/cove, cove-sandbox and runsc."
  type        = string
}

variable "image_tag" {
  description = "The image's tag (default: the chart's appVersion)."
  type        = string
  default     = ""
}

variable "database_dsn" {
  description = "The cluster's PostgreSQL connection string (postgres://user:pass@host/db). Kept in a Secret."
  type        = string
  sensitive   = true
}

variable "node_token" {
  description = "The secret API replicas present to nodes, 32 characters or more. Kept in a Secret."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.node_token) >= 32
    error_message = "node_token must have 32 characters or more."
  }
}

variable "object_store_url" {
  description = "The S3-compatible bucket the nodes share templates through, http(s)://host[:port]/bucket[/prefix] (\"\": the cluster builds no templates)."
  type        = string
  default     = ""
}

variable "object_store_access_key" {
  description = "The object store's access key. Kept in a Secret."
  type        = string
  default     = ""
  sensitive   = true
}

variable "object_store_secret_key" {
  description = "The object store's secret key. Kept in a Secret."
  type        = string
  default     = ""
  sensitive   = true
}

variable "api_replicas" {
  description = "How many cove api replicas run."
  type        = number
  default     = 2
}

variable "api_domain" {
  description = "The sandbox domain: {port}-{id}.{domain} must reach the API Service (a wildcard DNS record)."
  type        = string
  default     = ""
}

variable "sandbox_node_label" {
  description = "The label (key = value) of the Kubernetes nodes that run sandboxes."
  type        = map(string)
  default     = { "cove.dev/sandbox-host" = "true" }
}

variable "default_isolation" {
  description = "The driver of sandboxes that ask for none: namespaces or gvisor."
  type        = string
  default     = "namespaces"
  validation {
    condition     = contains(["namespaces", "gvisor"], var.default_isolation)
    error_message = "default_isolation must be namespaces or gvisor."
  }
}

variable "extra_values" {
  description = "More Helm values (deploy/helm/cove/values.yaml documents them), merged over this module's."
  type        = any
  default     = {}
}
