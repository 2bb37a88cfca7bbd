// Eigen 3.4 peer: row-major dynamic float matrices, the naive three steps
// S = Q K^T / sqrt(d_k); row softmax (Eigen's vectorised exp); O = S V.
// Threads: Eigen::setNbThreads (OpenMP) -- Eigen parallelises only its large
// GEMMs; the softmax and bias adds run on one thread.
#include <Eigen/Dense>
#include <cmath>

#include "../attnbench.hpp"

namespace {
using namespace attnbench;
using RMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const RMat>;
using MMap = Eigen::Map<RMat>;
using CRow = Eigen::Map<const Eigen::RowVectorXf>;

void eigen_attention(const Workload& w, const Inputs& in, float* out, int threads) {
  Eigen::setNbThreads(threads);
  const int n = w.n, H = w.heads, dk = w.d_k, dv = w.d_v, qc = w.qk_cols(), vc = w.v_cols();
  RMat Qp, Kp, Vp;
  if (w.project) {
    CMap X(in.X, n, w.d_model);
    Qp.noalias() = X * CMap(in.Wq, w.d_model, qc);
    Kp.noalias() = X * CMap(in.Wk, w.d_model, qc);
    Vp.noalias() = X * CMap(in.Wv, w.d_model, vc);
    if (in.bq) Qp.rowwise() += CRow(in.bq, qc);
    if (in.bk) Kp.rowwise() += CRow(in.bk, qc);
    if (in.bv) Vp.rowwise() += CRow(in.bv, vc);
  }
  CMap Q(w.project ? Qp.data() : in.Q, n, qc);
  CMap K(w.project ? Kp.data() : in.K, n, qc);
  CMap V(w.project ? Vp.data() : in.V, n, vc);
  RMat Obuf;
  if (w.out_proj) Obuf.resize(n, vc);
  MMap O(w.out_proj ? Obuf.data() : out, n, vc);
  const float scale = 1.0f / std::sqrt(float(dk));
  for (int h = 0; h < H; ++h) {
    RMat S(n, n);
    S.noalias() = scale * (Q.middleCols(h * dk, dk) * K.middleCols(h * dk, dk).transpose());
    if (w.causal)  // every score computed, the upper triangle masked before the softmax
      for (int i = 0; i + 1 < n; ++i) S.row(i).tail(n - i - 1).setConstant(-INFINITY);
    Eigen::VectorXf mx = S.rowwise().maxCoeff();
    S = (S.colwise() - mx).array().exp().matrix();
    Eigen::VectorXf sum = S.rowwise().sum();
    S.array().colwise() /= sum.array();
    O.middleCols(h * dv, dv).noalias() = S * V.middleCols(h * dv, dv);
  }
  if (w.out_proj) {
    MMap Y(out, n, w.d_model);
    Y.noalias() = Obuf * CMap(in.Wo, vc, w.d_model);
    if (in.bo) Y.rowwise() += CRow(in.bo, w.d_model);
  }
}

ATTNBENCH_REGISTER_FN("eigen", eigen_attention, true,
                      "Eigen 3.4 RowMajor MatrixXf, naive 3-step, OpenMP GEMM");
}  // namespace
