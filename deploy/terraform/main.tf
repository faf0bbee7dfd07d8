# Cove on a Kubernetes cluster: its namespace, the Secret with the
# database's connection string, the node token and the object store's
# keys, and the Helm release
# of deploy/helm/cove that reads them.

resource "kubernetes_namespace" "cove" {
  metadata {
    name = var.namespace
  }
}

resource "kubernetes_secret" "cove" {
  metadata {
    name      = "${var.release_name}-cluster"
    namespace = kubernetes_namespace.cove.metadata[0].name
  }
  data = {
    "dsn"        = var.database_dsn
    "node-token" = var.node_token
    "access-key" = var.object_store_access_key
    "secret-key" = var.object_store_secret_key
  }
}

locals {
  values = {
    image = {
      repository = var.image_repository
      tag        = var.image_tag
    }
    database = {
      external = {
        existingSecret = kubernetes_secret.cove.metadata[0].name
        secretKey      = "dsn"
      }
    }
    nodeToken = {
      existingSecret = kubernetes_secret.cove.metadata[0].name
    }
    objectStore = {
      url            = var.object_store_url
      existingSecret = kubernetes_secret.cove.metadata[0].name
    }
    api = {
      replicas = var.api_replicas
      domain   = var.api_domain
    }
    node = {
      selector         = var.sandbox_node_label
      defaultIsolation = var.default_isolation
    }
  }
}

resource "helm_release" "cove" {
  name      = var.release_name
  namespace = kubernetes_namespace.cove.metadata[0].name
  chart     = "${path.module}/../helm/cove"
  values    = [yamlencode(local.values), yamlencode(var.extra_values)]
}
